package graph

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// westFree is the free CPU (millicores) of west-1's nodes, computed from
// its nodes and the pods on them: what the tree may offer of region west.
func westFree(ctx context.Context) (int64, error) {
	c := env.Cluster("west-1").Client
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var free int64
	for _, n := range nodes.Items {
		q := n.Status.Allocatable[corev1.ResourceCPU]
		free += q.MilliValue()
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			q := ctr.Resources.Requests[corev1.ResourceCPU]
			free -= q.MilliValue()
		}
	}
	return free, nil
}

// advertisedWest sums the free CPU of region west over the summaries of
// cluster's virtual nodes: what cluster believes its children offer.
func advertisedWest(ctx context.Context, cluster string) (int64, error) {
	nodes, err := env.Cluster(cluster).Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var free int64
	for i := range nodes.Items {
		s, ok := api.ParseSummary(&nodes.Items[i])
		if !ok {
			continue
		}
		for _, g := range s.Groups {
			if g.Labels["topology.kubernetes.io/region"] == "west" {
				q := g.Free[corev1.ResourceCPU]
				free += q.MilliValue()
			}
		}
	}
	return free, nil
}

// waitCountedOnce waits until the root advertises exactly west-1's free
// CPU for region west (not twice, though west-1 reaches it through both
// east and west).
func waitCountedOnce(t *testing.T, when string) {
	t.Helper()
	var got, want int64
	framework.Eventually(t, time.Minute, when+": the root advertises west-1's free CPU in region west, once", func(ctx context.Context) (bool, string) {
		var err1, err2 error
		got, err1 = advertisedWest(ctx, "root")
		want, err2 = westFree(ctx)
		// Halves are rounded down to the millicore in each share.
		return err1 == nil && err2 == nil && got <= want && want-got <= 2,
			fmt.Sprintf("the root advertises %dm, west-1 has %dm (%v, %v)", got, want, err1, err2)
	})
	t.Logf("%s: root advertises %dm of west-1's %dm free", when, got, want)
}

// West-1, shared by west and east, is counted once at the root; pods
// created at three clusters each run exactly once, without a loop, and the
// root's figure follows what they use.
func TestDiamondAndCycleCountOnceRunOnce(t *testing.T) {
	ctx := t.Context()
	waitCountedOnce(t, "idle")

	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	const perCluster = 3
	origins := []string{"root", "east", "west"}
	// The pods made at east and west go at the end, where they were made
	// (the namespace goes at the root only): a later test caps what west
	// runs in west-1.
	t.Cleanup(func() {
		for _, c := range origins {
			for i := range perCluster {
				_ = env.Cluster(c).Client.CoreV1().Pods(ns).Delete(context.Background(), fmt.Sprintf("from-%s-%d", c, i), metav1.DeleteOptions{})
			}
		}
	})
	for _, c := range origins {
		if c != "root" {
			// After the root's pods, as a user there would: it may be
			// there already, made for their delegates.
			require.NoError(t, env.Cluster(c).EnsureNamespace(ctx, ns))
		}
		for i := range perCluster {
			_, err := env.Cluster(c).Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("from-%s-%d", c, i)},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"topology.kubernetes.io/region": "west"},
					Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
				},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	for _, c := range origins {
		framework.Eventually(t, 2*time.Minute, "the pods created at "+c+" all Running there", func(ctx context.Context) (bool, string) {
			list, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			running := 0
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning && strings.HasPrefix(p.Name, "from-"+c+"-") {
					running++
				}
			}
			return running == perCluster, fmt.Sprintf("%d of %d running", running, perCluster)
		})
	}

	// In west-1, the only cluster with nodes: one pod per pod created,
	// each on a path without a repeated cluster.
	leafPods, err := env.Cluster("west-1").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	byOrigin := map[string]int{}
	for _, p := range leafPods.Items {
		path := api.PodPath(&p)
		require.NotEmpty(t, path, p.Name)
		require.Equal(t, "west-1", path[len(path)-1], p.Name)
		sorted := slices.Clone(path)
		slices.Sort(sorted)
		require.Len(t, slices.Compact(sorted), len(path), "pod %s looped: path %v", p.Name, path)
		byOrigin[path[0]]++
		require.True(t, strings.HasPrefix(p.Name, "from-"+path[0]+"-"), "pod %s came from %s", p.Name, path[0])
	}
	require.Equal(t, map[string]int{"root": perCluster, "east": perCluster, "west": perCluster}, byOrigin, "every pod runs exactly once")
	// One delegate per level: no pod of ns anywhere but on its path.
	for _, c := range []string{"root", "east", "west"} {
		list, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		names := map[string]int{}
		for _, p := range list.Items {
			names[p.Name]++
		}
		for name, n := range names {
			require.Equal(t, 1, n, "%s holds %s %d times", c, name, n)
		}
	}
	waitCountedOnce(t, "with 9 pods of 500m")
}
