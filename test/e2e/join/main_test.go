// Package join tests joining clusters for real: control planes from
// test/framework, nestlet agents and nestctl built from this checkout.
//
// Topology (started once for the package):
//
//	root <- east (2 nodes, region east), west (1 node, region west), mid
//	mid  <- leaf-a (region east), leaf-b (region west)
package join

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nestlet/nestlet/test/framework"
)

var env *framework.Environment

func node(name, region, zone, cpu, memory string) framework.NodeOptions {
	return framework.NodeOptions{
		Name:   name,
		Labels: map[string]string{"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone},
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(memory),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
	}
}

var spec = framework.Spec{Clusters: []framework.ClusterOptions{
	{Name: "root"},
	{Name: "east", Nodes: []framework.NodeOptions{node("east-1", "east", "east-a", "4", "8Gi"), node("east-2", "east", "east-b", "8", "16Gi")}},
	{Name: "west", Nodes: []framework.NodeOptions{node("west-1", "west", "west-a", "2500m", "4Gi")}},
	{Name: "mid"},
	{Name: "leaf-a", Nodes: []framework.NodeOptions{node("leaf-a-1", "east", "east-c", "3", "6Gi")}},
	{Name: "leaf-b", Nodes: []framework.NodeOptions{node("leaf-b-1", "west", "west-b", "5", "10Gi"), node("leaf-b-2", "west", "west-c", "1", "2Gi")}},
}}

// joins is the tree: child -> parent.
var joins = [][2]string{{"east", "root"}, {"west", "root"}, {"mid", "root"}, {"leaf-a", "mid"}, {"leaf-b", "mid"}}

// targetOf holds the Target name of each join, by child.
var targetOf = map[string]string{}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	env, err = framework.Start(ctx, framework.Config{}, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting clusters:", err)
		return 1
	}
	defer func() {
		env.Cleanup(code != 0, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
	}()
	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the tree:", err)
		return 1
	}
	return m.Run()
}

func setup(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(env.Clusters()))
	for i, c := range env.Clusters() {
		wg.Go(func() {
			_, errs[i] = env.StartAgent(ctx, c)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	var mu sync.Mutex
	jerrs := make([]error, len(joins))
	for i, j := range joins {
		wg.Go(func() {
			name, err := framework.Join(ctx, env.Cluster(j[1]), env.Cluster(j[0]), framework.JoinOptions{
				ExtraJoinArgs: []string{"--report-frequency=3s"},
			})
			jerrs[i] = err
			mu.Lock()
			targetOf[j[0]] = name
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range jerrs {
		if err != nil {
			return err
		}
	}
	return nil
}
