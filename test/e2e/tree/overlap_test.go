package tree

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestOverlappingPodCIDRs: a node added in east-2 takes west-1's pod CIDR.
// East and west both say so on their Targets; the root, which granted
// that range to west first (its pool, first come), keeps routing it to
// west, refuses it to east (east's Target says so), and routes every
// other range as before: the client in east-1 still reaches the replicas
// in east-2 and west-2. Once the node goes, the conditions clear.
func TestOverlappingPodCIDRs(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	answer, _ := webEastWest(t, ns)
	clash := ownPodCIDR(t, "west-1")
	others := []string{ownPodCIDR(t, "east-1"), ownPodCIDR(t, "east-2"), ownPodCIDR(t, "west-2")}
	framework.Eventually(t, time.Minute, "the root routes every leaf's pod CIDR", func(context.Context) (bool, string) {
		routes, out := rootRoutes(ctx)
		return framework.Covers(routes, append(others, clash)...), out
	})

	_, err := env.Cluster("east-2").AddNode(ctx, launcher.NodeOptions{Name: "east-2-clash", PodCIDR: clash})
	require.NoError(t, err)
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = env.Cluster("east-2").Client.CoreV1().Nodes().Delete(context.Background(), "east-2-clash", metav1.DeleteOptions{})
		}
	})
	for _, child := range []string{"east", "west"} {
		var got metav1.Condition
		require.NoError(t, env.Cluster(child).WaitTarget(ctx, tree.Targets[child], 2*time.Minute, func(tg *v1alpha1.Target) bool {
			got = launcher.TargetCondition(tg, v1alpha1.ConditionPodCIDRsDistinct)
			return got.Reason == v1alpha1.ReasonPodCIDROverlap && strings.Contains(got.Message, clash)
		}), "%s's %s condition: %+v", child, v1alpha1.ConditionPodCIDRsDistinct, got)
		t.Logf("%s: %s", child, got.Message)
		n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, child, metav1.GetOptions{})
		require.NoError(t, err)
		require.Contains(t, n.Annotations[api.AnnotationPodCIDROverlap], clash, "the virtual node %s at the root", child)
	}
	var granted metav1.Condition
	require.NoError(t, env.Cluster("east").WaitTarget(ctx, tree.Targets["east"], 2*time.Minute, func(tg *v1alpha1.Target) bool {
		granted = launcher.TargetCondition(tg, v1alpha1.ConditionPodCIDRsGranted)
		return granted.Reason == v1alpha1.ReasonPodCIDRsRefused && strings.Contains(granted.Message, clash+" (held by cluster west)")
	}), "east's %s condition: %+v", v1alpha1.ConditionPodCIDRsGranted, granted)
	t.Logf("east: %s", granted.Message)
	west, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, "west", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, api.PodCIDROverlapNone, west.Annotations[api.AnnotationPodCIDRsRefused], "west keeps the range it held")
	framework.Eventually(t, time.Minute, "the root routes "+clash+" (to west) and the other leaves' ranges still", func(context.Context) (bool, string) {
		routes, out := rootRoutes(ctx)
		return framework.Covers(routes, append(others, clash)...), out
	})
	seen := map[string]int{}
	framework.Eventually(t, 2*time.Minute, "the client in east-1 still reaches both replicas", func(context.Context) (bool, string) {
		sides, _, last := askWeb(t, ns, answer, 1)
		for side, n := range sides {
			seen[side] += n
		}
		return len(seen) == 2, fmt.Sprintf("seen %v; last %s", seen, last)
	})

	require.NoError(t, env.Cluster("east-2").Client.CoreV1().Nodes().Delete(ctx, "east-2-clash", metav1.DeleteOptions{}))
	removed = true
	for _, child := range []string{"east", "west"} {
		require.NoError(t, env.Cluster(child).WaitTarget(ctx, tree.Targets[child], 2*time.Minute, func(tg *v1alpha1.Target) bool {
			return launcher.TargetCondition(tg, v1alpha1.ConditionPodCIDRsDistinct).Status == metav1.ConditionTrue
		}), "%s's pod CIDRs distinct again", child)
	}
	require.NoError(t, env.Cluster("east").WaitTarget(ctx, tree.Targets["east"], 2*time.Minute, func(tg *v1alpha1.Target) bool {
		return launcher.TargetCondition(tg, v1alpha1.ConditionPodCIDRsGranted).Status == metav1.ConditionTrue
	}), "east's pod CIDRs granted again")
	framework.Eventually(t, time.Minute, "the root routes every leaf's range", func(context.Context) (bool, string) {
		routes, out := rootRoutes(ctx)
		return framework.Covers(routes, append(others, clash)...), out
	})
}

// ownPodCIDR is the pod CIDR of the real node of leaf.
func ownPodCIDR(t *testing.T, leaf string) string {
	t.Helper()
	nodes, err := env.Cluster(leaf).Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: "!" + api.LabelCluster})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		if n.Labels["type"] != "kwok" && n.Spec.PodCIDR != "" {
			return n.Spec.PodCIDR
		}
	}
	require.FailNow(t, "no real node with a pod CIDR in "+leaf)
	return ""
}

// rootRoutes are the routes through the root's gateway, and what `ip
// route` printed.
func rootRoutes(ctx context.Context) ([]netip.Prefix, string) {
	routes, out, err := framework.GatewayRoutes(ctx, env.Cluster("root"))
	if err != nil {
		return nil, err.Error()
	}
	return routes, out
}
