// Package realleaf tests pods that run as real containers two levels below
// the root, on a node run by a real kubelet with containerd:
//
//	root <- mid <- leaf
//	root: metrics-server (kubectl top, autoscaling)
//	leaf: one real node (kubelet, containerd, runc, CNI bridge, kube-proxy
//	      in nftables mode), region real
//
// Every cluster is a host of its own; the leaf's real node has a network
// namespace of its own behind the leaf's host.
//
// The agents serve their virtual nodes' kubelet API directly (direct mode,
// on their host's address, which admits the parent's), which is what serves the node-level
// endpoints (/stats/summary, /metrics/resource) a nestlet-proxy refuses;
// logs, exec and port-forward through proxies and tunnels are the kubelet
// package's tests, and do not depend on what runs in the leaf.
//
// The real node also imports Nestlet's own image, built by hack/images.sh
// (`make images`) as the package starts.
//
// Everything is checked from the root with what a user has (kubectl, the
// API), and in the leaf's runtime where the API alone would not prove it.
// On a machine that cannot run real nodes the tests skip and say why;
// .ci/run makes that a failure (framework.RequireRealNodesEnv).
package realleaf

import (
	"fmt"
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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Nestlet's own image (`make images`), which the real node imports.
	dir, err := os.MkdirTemp("", "nestlet-image-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if nestletImage, err = framework.BuildImage(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return framework.RunRealTreeMain(m, framework.Tree{
		Clusters: []launcher.ClusterOptions{{Name: "root", MetricsServer: true,
			// Autoscalers at the root act every 5 s (metrics-server
			// resolves every 10 s).
			ControllerManagerArgs: []string{"--horizontal-pod-autoscaler-sync-period=5s"}}, {Name: "mid"}, {Name: "leaf", LocalPath: true,
			RealNodes: []launcher.RealNodeOptions{{Name: leafNode, KubeProxy: true, Labels: map[string]string{
				"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": region + "-a"},
				Images: map[string]string{nestletImage.Ref: nestletImage.Archive}}}}},
		Edges:    [][2]string{{"mid", "root"}, {"leaf", "mid"}},
		JoinArgs: []string{"--report-frequency=3s"},
		// Pods call the API server of the cluster they were made in (the
		// root's for the tests' pods), with its tokens.
		AgentArgs: []string{"--kubelet-api=direct", "--kubelet-direct-address=" + framework.ClusterAddress, "--pod-api=origin"},
		// Both ways of reaching a child's kubelet API on one path: mid
		// holds a tunnel to the root's nestlet-proxy, which serves its
		// virtual node on a port of its own (stats and metrics included);
		// the leaf serves mid directly.
		ClusterAgentArgs: map[string][]string{"mid": {"--kubelet-api=tunnel"}},
		// Direct mode: the parent reaches its child's agent, whose host
		// admits it (as an operator makes a child reachable). Nothing
		// admits the leaf at the root's host: its pods reach the root's API
		// server through the gateways' tunnels, at the address the root's
		// gateway relays (launcher.Cluster.GatewayArgs).
		Reachable: [][2]string{{"root", "mid"}, {"mid", "leaf"}},
		Gateways:  true,
	}, func(te *framework.TreeEnv) { env = te.Environment })
}
