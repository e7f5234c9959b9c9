// Package faults breaks the links between clusters and checks what a tree
// does about it: nothing lost, nothing run twice.
//
//	root <- east, west     (each child reaches root through a breakable
//	                        TCP proxy: framework.Link)
//	east: two kwok nodes, region east; west: two kwok nodes, region west
//
// The root's controller manager declares a node unreachable 20 s after its
// last heartbeat (the default is 40 s), so that a long partition fits a test.
package faults

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

// graceSeconds is the root's --node-monitor-grace-period.
const graceSeconds = 20

func TestMain(m *testing.M) {
	leaf := func(name, region string) launcher.ClusterOptions {
		node := func(suffix string) launcher.NodeOptions {
			return launcher.NodeOptions{Name: name + "-" + suffix, Labels: map[string]string{"topology.kubernetes.io/region": region}}
		}
		return launcher.ClusterOptions{Name: name, Nodes: []launcher.NodeOptions{node("a"), node("b")},
			ControllerManagerArgs: []string{"--node-monitor-grace-period=2m"}}
	}
	os.Exit(framework.RunTreeMain(m, framework.Tree{
		Clusters: []launcher.ClusterOptions{
			{Name: "root", ControllerManagerArgs: []string{"--node-monitor-grace-period=20s"}},
			leaf("east", "east"), leaf("west", "west"),
		},
		Edges:    [][2]string{{"east", "root"}, {"west", "root"}},
		JoinArgs: []string{"--report-frequency=2s"},
		Links:    true,
		Metrics:  true,
	}, func(te *framework.TreeEnv) { env, tree = te.Environment, te }))
}
