// Package framework is the test layer over launcher/, the launcher
// of real local control planes: clusters started for one test or one test
// package (StartForTest, RunTreeMain), a namespace of a test's own in them
// (Namespace, KeptNamespace), waits that fail the test with what they
// waited for (Eventually), and what benchmarks measure with (pod
// timelines, quantiles, CPU time and memory of processes, API request
// counters).
package framework
