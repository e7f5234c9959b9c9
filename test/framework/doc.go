// Package framework is the test layer over pkg/localcluster, the launcher
// of real local control planes: clusters started for one test or one test
// package (StartForTest, Main, RunTreeMain), and what benchmarks measure
// with (pod timelines, quantiles, CPU time and memory of processes, API
// request counters).
package framework
