// Package security plays a hostile child against its parent: with the
// real node credential its agent holds (and bootstrap tokens made for it),
// each probe tries one way of taking over the parent, and must be refused
// and leave the parent unchanged. `make bench` (BenchmarkProbes) prints
// how many probes were tried and refused, and how long a revoked child's
// tunnel outlives its revocation.
//
// Topology (started once for the package; each cluster its own host,
// children behind NAT, a nestlet-proxy in root, a gateway in every agent):
//
//	root <- east (region east, the hostile child), west (region west)
package security

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

func node(name, region string) launcher.NodeOptions {
	return launcher.NodeOptions{
		Name:   name,
		Labels: map[string]string{"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": region + "-a"},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
	}
}

func TestMain(m *testing.M) {
	os.Exit(framework.RunTreeMain(m, framework.Tree{
		Clusters: []launcher.ClusterOptions{
			// The probes see which virtual node the root's scheduler chose
			// for a pod that waits at Permit (a frozen child never
			// answers its reservation) by status.nominatedNodeName, which
			// Kubernetes writes then with this gate; nestlet-scheduler
			// turns it off by default (one write less per level).
			{Name: "root", SchedulerArgs: []string{"--feature-gates=NominatedNodeNameForExpectation=true"}},
			{Name: "east", Nodes: []launcher.NodeOptions{node("east-1", "east")}},
			{Name: "west", Nodes: []launcher.NodeOptions{node("west-1", "west")}},
		},
		Edges:    [][2]string{{"east", "root"}, {"west", "root"}},
		JoinArgs: []string{"--report-frequency=3s"},
		// The gateways route the pod CIDRs each child is granted: the
		// route claims are played against them.
		Gateways: true,
	}, func(te *framework.TreeEnv) { env, targetOf = te.Environment, te.Targets }))
}
