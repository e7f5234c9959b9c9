// Package realleaf tests pods that run as real containers two levels below
// the root, on a node run by a real kubelet with containerd:
//
//	root <- mid <- leaf
//	leaf: one real node (kubelet, containerd, runc, CNI bridge, kube-proxy
//	      in nftables mode), region real
//
// The agents serve their virtual nodes' kubelet API directly (direct mode,
// on this machine's address), which is what serves the node-level
// endpoints (/stats/summary, /metrics/resource) a nestlet-proxy refuses;
// logs, exec and port-forward through proxies and tunnels are the kubelet
// package's tests, and do not depend on what runs in the leaf.
//
// Everything is checked from the root with what a user has (kubectl, the
// API), and in the leaf's runtime where the API alone would not prove it.
// On a machine that cannot run real nodes the tests skip and say why;
// .ci/run makes that a failure (framework.RequireRealNodesEnv).
package realleaf

import (
	"os"
	"testing"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var env *launcher.Environment

const (
	region   = "real"
	leafNode = "leaf-real-1"
)

func TestMain(m *testing.M) {
	os.Exit(framework.RunRealTreeMain(m, framework.Tree{
		Clusters: []launcher.ClusterOptions{{Name: "root"}, {Name: "mid"}, {Name: "leaf",
			RealNodes: []launcher.RealNodeOptions{{Name: leafNode, KubeProxy: true, Labels: map[string]string{
				"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": region + "-a"}}}}},
		Edges:     [][2]string{{"mid", "root"}, {"leaf", "mid"}},
		JoinArgs:  []string{"--report-frequency=3s"},
		AgentArgs: []string{"--kubelet-api=direct", "--kubelet-direct-address=" + launcher.HostIP()},
	}, func(te *framework.TreeEnv) { env = te.Environment }))
}
