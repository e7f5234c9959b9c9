// Package framework is the test layer over launcher/, the launcher
// of real local control planes: clusters started for one test or one test
// package (StartForTest, RunTreeMain), and what benchmarks measure
// with (pod timelines, quantiles, CPU time and memory of processes, API
// request counters).
package framework
