// Package scale benchmarks Nestlet at the size of a fleet: by default one
// root, 10 field clusters and 1,000 leaf clusters of 10 nodes each (10,000
// nodes), against the same 10,000 nodes as one flat cluster, in the same
// run (BenchmarkFleet).
//
//	root <- field-00 ... field-09       (real control planes)
//	field-NN <- 100 hollow leaves       (region field-NN, one zone per leaf)
//	hollow leaf: 10 simulated nodes
//
//	flat: one real control plane with 10,000 kwok nodes (same labels)
//
// The leaves are hollow children (test/hollow): real agents, in this
// process, against the fields' real API servers, over simulated clusters.
// NESTLET_FLEET=<fields>x<leaves per field>x<nodes per leaf> and
// NESTLET_FLEET_REPLICAS change the shape (e.g. 2x60x2 and 1000 for the
// Gaia paper's 1 + 2 + 120):
//
//	go test ./test/e2e/scale -run '^$' -bench Fleet -benchtime 1x -timeout 60m
//
// The benchmark starts and stops its clusters itself, one topology at a
// time: the flat cluster first, then the tree.
package scale
