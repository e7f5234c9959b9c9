// Package tree runs the journeys of a user on the tree `make demo` starts
// (hack/demo/playground.yaml), every cluster a host of its own on the
// simulated WAN:
//
//	root (global)  <- east, west              (nestlet-proxy in each parent)
//	east (east)    <- east-1, east-2          (leaves, behind NAT)
//	west (west)    <- west-1, west-2
//
// Every leaf has one real node (kubelet, containerd, kube-proxy, the
// cluster's CoreDNS), labelled with its region and zone. No host admits a
// connection from another but from its children: every request of the root
// for a pod goes down through the tunnels the children opened. Each child
// reaches its parent through a WAN link (framework.Link) that a test cuts.
// Every agent runs a gateway: pod traffic between the leaves goes through
// the WireGuard tunnels each child opens to its parent. West's children
// renew their node certificates, and with them their gateways' keys,
// about every 36 s.
//
// On a machine that cannot run real nodes the tests skip and say why;
// .ci/run makes that a failure (framework.RequireRealNodesEnv).
package tree

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var (
	env  *launcher.Environment
	tree *framework.TreeEnv
	topo *launcher.Topology
)

// shortCertificates is set unless benchmarking: west signs node
// certificates for 2 minutes (benchmarks measure the tunnels, not their
// rotations).
var shortCertificates bool

// leaves are the leaf clusters of the demo, each with one real node whose
// zone is the cluster's name.
var leaves = []string{"east-1", "east-2", "west-1", "west-2"}

// graceSeconds is the root's and east's --node-monitor-grace-period: a
// child cut off for longer is declared unreachable there.
const graceSeconds = 20

// demoFile returns the path of a file of hack/demo.
func demoFile(name string) string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "..", "hack", "demo", name)
}

func TestMain(m *testing.M) {
	var err error
	topo, err = launcher.LoadTopology(demoFile("playground.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	shortCertificates = flag.Lookup("test.bench").Value.String() == ""
	clusters := topo.ClusterOptions(false)
	for i := range clusters {
		switch clusters[i].Name {
		case "east", "root":
			clusters[i].ControllerManagerArgs = []string{fmt.Sprintf("--node-monitor-grace-period=%ds", graceSeconds)}
		case "west":
			if shortCertificates {
				// With the signer's 5 minutes of backdating, west-1 and
				// west-2 renew about every 36 s: every test runs across
				// rotations of their gateways' keys.
				clusters[i].ControllerManagerArgs = []string{"--cluster-signing-duration=2m"}
			}
		}
	}
	os.Exit(framework.RunRealTreeMain(m, framework.Tree{
		Clusters: clusters,
		Edges:    topo.Edges(),
		JoinArgs: []string{"--report-frequency=3s"},
		Links:    true,
		Gateways: true,
		Metrics:  true,
		// The root's proxy serves its Services' node ports:
		// TestNodePortAtTheRoot.
		ServiceNodePorts: true,
		// The root's children take pods as a cluster's nodes do: the
		// upstream suite counts a node with a NoSchedule taint as one
		// that takes none (TestConformanceAtTheRoot; every scheduler of
		// the tree is Nestlet's, as in make conformance).
		ClusterAgentArgs: map[string][]string{"root": {"--child-taint-effect=PreferNoSchedule"}},
	}, func(te *framework.TreeEnv) { env, tree = te.Environment, te }))
}
