// Package depth tests and benchmarks a chain of four levels of real control
// planes, three hops from the root to the only leaf with nodes:
//
//	root (nestlet-proxy) <- l1 (nestlet-proxy) <- l2 (nestlet-proxy) <- l3
//	l3: two kwok nodes, region deep
//
// A pod created at the root is forwarded three times, and kubectl logs and
// exec reach it through three tunnels. BenchmarkHopLatency creates the same
// pods at each level in turn (0, 1, 2 and 3 hops above the leaf) to measure
// what one hop adds.
package depth

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var env *launcher.Environment

// chain is the clusters from the root down.
var chain = []string{"root", "l1", "l2", "l3"}

func TestMain(m *testing.M) {
	// Room for the benchmark's 800 pods.
	node := func(name string) launcher.NodeOptions {
		return launcher.NodeOptions{Name: name,
			Labels: map[string]string{"topology.kubernetes.io/region": "deep", "topology.kubernetes.io/zone": name},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
				corev1.ResourcePods: resource.MustParse("1000")}}
	}
	os.Exit(framework.RunTreeMain(m, framework.Tree{
		Clusters: []launcher.ClusterOptions{{Name: "root"}, {Name: "l1"}, {Name: "l2"},
			{Name: "l3", Nodes: []launcher.NodeOptions{node("l3-a"), node("l3-b")}}},
		Edges:    [][2]string{{"l1", "root"}, {"l2", "l1"}, {"l3", "l2"}},
		JoinArgs: []string{"--report-frequency=3s"},
		Proxies:  []string{"root", "l1", "l2"},
		// The root is made only of clusters, and its default scheduler
		// is Nestlet's: its children's nodes take pods (TestThreeHopsDown).
		ClusterAgentArgs: map[string][]string{"root": {"--child-taint-effect=PreferNoSchedule"}},
	}, func(te *framework.TreeEnv) { env = te.Environment }))
}
