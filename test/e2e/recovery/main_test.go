// Package recovery checks what a three-level tree does when a cluster in
// the middle loses its control plane for a while, when node certificates
// expire every few minutes, and that a Job's pod that completed never runs
// again across faults, counted in a real container runtime:
//
//	root  (nestlet-proxy)
//	 <- mid  (nestlet-proxy; an etcd of its own)
//	     <- leaf  kwok nodes leaf-a, leaf-b (zone kwok) and one real node
//	              leaf-real (kubelet, containerd: zone real), region r
//
// Every child reaches its parent's API server through a breakable link
// (framework.Link), and its kubelet API through the parent's proxy. The
// parents sign node certificates for 2 minutes only
// (--cluster-signing-duration; with the signer's 5 minutes of backdating,
// agents renew them about every 36 s), so every test of the package runs
// across renewals.
package recovery

import (
	"os"
	"testing"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var (
	env  *launcher.Environment
	tree *framework.TreeEnv
)

const (
	region   = "r"
	realNode = "leaf-real"
)

func TestMain(m *testing.M) {
	// Both keep the default 40 s grace period, which mid's restarts stay
	// under.
	parentArgs := []string{"--cluster-signing-duration=2m"}
	kwokNode := func(name string) launcher.NodeOptions {
		return launcher.NodeOptions{Name: name, Labels: map[string]string{
			"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": "kwok"}}
	}
	os.Exit(framework.RunRealTreeMain(m, framework.Tree{
		Clusters: []launcher.ClusterOptions{
			{Name: "root", ControllerManagerArgs: parentArgs},
			{Name: "mid", ControllerManagerArgs: parentArgs, OwnEtcd: true},
			{Name: "leaf", Nodes: []launcher.NodeOptions{kwokNode("leaf-a"), kwokNode("leaf-b")},
				ControllerManagerArgs: []string{"--node-monitor-grace-period=2m"},
				RealNodes: []launcher.RealNodeOptions{{Name: realNode, Labels: map[string]string{
					"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": "real"}}}},
		},
		Edges:    edges,
		JoinArgs: []string{"--report-frequency=2s"},
		Proxies:  []string{"root", "mid"},
		Links:    true,
	}, func(te *framework.TreeEnv) { env, tree = te.Environment, te }))
}
