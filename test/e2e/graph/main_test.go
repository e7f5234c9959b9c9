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
// West also has a kwok node of its own, without a region, that no test
// uses: kube-controller-manager evicts nothing while every node of a
// cluster is down (it takes that for its own network failing), so a
// cluster whose only node is a lost child would never let it go.
package graph

import (
	"os"
	"testing"

	"github.com/nestlet/nestlet/pkg/localcluster"
	"github.com/nestlet/nestlet/test/framework"
)

var (
	env  *localcluster.Environment
	tree *framework.TreeEnv
)

func TestMain(m *testing.M) {
	node := func(name string) localcluster.NodeOptions {
		return localcluster.NodeOptions{Name: name, Labels: map[string]string{"topology.kubernetes.io/region": "west", "topology.kubernetes.io/zone": name}}
	}
	os.Exit(framework.RunTreeMain(m, framework.Tree{
		Clusters: []localcluster.ClusterOptions{{Name: "root"}, {Name: "east"}, {Name: "west", ControllerManagerArgs: []string{"--node-monitor-grace-period=20s"},
			Nodes: []localcluster.NodeOptions{{Name: "west-spare"}}},
			{Name: "west-1", Nodes: []localcluster.NodeOptions{node("west-1-a"), node("west-1-b")}}},
		Edges:    [][2]string{{"east", "root"}, {"west", "root"}, {"west-1", "west"}, {"west-1", "east"}, {"root", "east"}},
		JoinArgs: []string{"--report-frequency=2s"},
		Links:    true,
	}, func(te *framework.TreeEnv) { env, tree = te.Environment, te }))
}
