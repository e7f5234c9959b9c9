// Package launcher starts real Kubernetes control planes as local
// processes: the launcher behind `nestctl playground`, and under the
// integration tests, end-to-end tests and benchmarks (through the test layer
// in test/framework).
//
// A Cluster is a kube-apiserver (Node,RBAC authorization, NodeRestriction,
// bootstrap-token authentication), a kube-controller-manager (CSR signing,
// bootstrapsigner and tokencleaner), a scheduler and kwok simulating the
// kubelets of its nodes, all on loopback. Several clusters share one etcd
// under distinct key prefixes. An Environment starts a topology of clusters
// concurrently and stops every process it started, each in its own process
// group, whatever way the caller ends.
//
// The binaries come from hack/install-binaries.sh (see FindBinaries). This
// package must not import "testing": `nestctl` links it.
package launcher
