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
// the WireGuard tunnels each child opens to its parent.
//
// On a machine that cannot run real nodes the tests skip and say why;
// .ci/run makes that a failure (framework.RequireRealNodesEnv).
package tree

import (
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
	clusters := topo.ClusterOptions(false)
	for i := range clusters {
		if clusters[i].Name == "east" || clusters[i].Name == "root" {
			clusters[i].ControllerManagerArgs = []string{fmt.Sprintf("--node-monitor-grace-period=%ds", graceSeconds)}
		}
	}
	os.Exit(framework.RunRealTreeMain(m, framework.Tree{
		Clusters: clusters,
		Edges:    topo.Edges(),
		JoinArgs: []string{"--report-frequency=3s"},
		Links:    true,
		Gateways: true,
		Metrics:  true,
	}, func(te *framework.TreeEnv) { env, tree = te.Environment, te }))
}
