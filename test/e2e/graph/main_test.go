// Package graph tests placement and counting on a cluster graph that is not
// a tree: a diamond (west-1 joined both west and east) and a cycle (root
// and east joined each other):
//
//	root <- east, west        east <- root, west-1
//	west <- west-1
//	west-1: two kwok nodes, region west
//
// From east, region west is one hop away (west-1) and three hops away
// through the cycle (root -> west -> west-1). Every child reaches its
// parent through a breakable link (framework.Link); west declares a node
// unreachable 20 s after its last heartbeat.
//
// West has no node of its own: when it loses west-1, every node of west
// is down, and west's controller manager evicts nothing (it takes that for
// its own network failing). West's virtual node at the root then says
// NotReady (NoReadyNodeInChildCluster), so that the root evicts and
// replaces one level up: the backup test depends on it.
package graph

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var (
	env  *launcher.Environment
	tree *framework.TreeEnv
)

func TestMain(m *testing.M) {
	node := func(name string) launcher.NodeOptions {
		return launcher.NodeOptions{Name: name, Labels: map[string]string{"topology.kubernetes.io/region": "west", "topology.kubernetes.io/zone": name}}
	}
	os.Exit(framework.RunTreeMain(m, framework.Tree{
		Clusters: []launcher.ClusterOptions{{Name: "root"}, {Name: "east"}, {Name: "west", ControllerManagerArgs: []string{"--node-monitor-grace-period=20s"}},
			{Name: "west-1", Nodes: []launcher.NodeOptions{node("west-1-a"), node("west-1-b")}}},
		Edges:    [][2]string{{"east", "root"}, {"west", "root"}, {"west-1", "west"}, {"west-1", "east"}, {"root", "east"}},
		JoinArgs: []string{"--report-frequency=2s"},
		Links:    true,
	}, func(te *framework.TreeEnv) { env, tree = te.Environment, te }))
}

// waitOffersWest waits until each named virtual node of cluster is Ready
// and its summary offers free CPU in region west. A test that expects
// placement on several of them must not start while a join is still
// settling: the scheduler would see one of them alone.
func waitOffersWest(t *testing.T, cluster string, nodes ...string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, cluster+"'s virtual nodes offer region west", func(ctx context.Context) (bool, string) {
		for _, name := range nodes {
			n, err := env.Cluster(cluster).Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !nodeReady(n) {
				return false, name + " is not Ready"
			}
			s, ok := api.ParseSummary(n)
			if !ok {
				return false, name + " has no summary"
			}
			var free int64
			for _, g := range s.Groups {
				if g.Labels["topology.kubernetes.io/region"] == "west" {
					q := g.Free[corev1.ResourceCPU]
					free += q.MilliValue()
				}
			}
			if free <= 0 {
				return false, name + " offers no free CPU in region west"
			}
		}
		return true, ""
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
