// Package join tests joining clusters for real: control planes from
// launcher/, nestlet agents and nestctl built by make build.
//
// Topology (started once for the package):
//
//	root <- east (2 nodes, region east), west (1 node, region west), mid
//	mid  <- leaf-a (region east), leaf-b (region west)
package join

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var (
	env *launcher.Environment
	// targetOf holds the Target name of each join, by child.
	targetOf map[string]string
)

func node(name, region, zone, cpu, memory string) launcher.NodeOptions {
	return launcher.NodeOptions{
		Name:   name,
		Labels: map[string]string{"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(memory),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
	}
}

var spec = launcher.Spec{Clusters: []launcher.ClusterOptions{
	{Name: "root"},
	{Name: "east", Nodes: []launcher.NodeOptions{node("east-1", "east", "east-a", "4", "8Gi"), node("east-2", "east", "east-b", "8", "16Gi")}},
	{Name: "west", Nodes: []launcher.NodeOptions{node("west-1", "west", "west-a", "2500m", "4Gi")}},
	{Name: "mid"},
	{Name: "leaf-a", Nodes: []launcher.NodeOptions{node("leaf-a-1", "east", "east-c", "3", "6Gi")}},
	{Name: "leaf-b", Nodes: []launcher.NodeOptions{node("leaf-b-1", "west", "west-b", "5", "10Gi"), node("leaf-b-2", "west", "west-c", "1", "2Gi")}},
}}

func TestMain(m *testing.M) {
	os.Exit(framework.RunTreeMain(m, framework.Tree{
		Clusters: spec.Clusters,
		Edges:    [][2]string{{"east", "root"}, {"west", "root"}, {"mid", "root"}, {"leaf-a", "mid"}, {"leaf-b", "mid"}},
		JoinArgs: []string{"--report-frequency=3s"},
	}, func(te *framework.TreeEnv) { env, targetOf = te.Environment, te.Targets }))
}
