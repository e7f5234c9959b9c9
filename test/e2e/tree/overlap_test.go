package tree

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
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
// East and west both say so on their Targets; the root's gateway routes
// that range to neither of them, and every other range as before: the
// client in east-1 still reaches the replicas in east-2 and west-2. Once
// the node goes, the conditions clear and the route comes back.
func TestOverlappingPodCIDRs(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	answer, _ := webEastWest(t, ns)
	clash := ownPodCIDR(t, "west-1")
	others := []string{ownPodCIDR(t, "east-1"), ownPodCIDR(t, "east-2"), ownPodCIDR(t, "west-2")}
	framework.Eventually(t, time.Minute, "the root routes every leaf's pod CIDR", func(context.Context) (bool, string) {
		routes := gatewayRoutes(ctx, "root")
		return coversAll(routes, append(others, clash)), routes
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
	framework.Eventually(t, time.Minute, "the root routes "+clash+" to neither child, and the other leaves' ranges still", func(context.Context) (bool, string) {
		routes := gatewayRoutes(ctx, "root")
		return !coversAny(routes, clash) && coversAll(routes, others), routes
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
	framework.Eventually(t, time.Minute, "the root routes "+clash+" again", func(context.Context) (bool, string) {
		routes := gatewayRoutes(ctx, "root")
		return coversAll(routes, append(others, clash)), routes
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

// gatewayRoutes lists the routes through the gateway's interface on the
// host of cluster.
func gatewayRoutes(ctx context.Context, cluster string) string {
	out, err := exec.CommandContext(ctx, "ip", "-n", env.Cluster(cluster).Host.Netns, "-4", "route", "show", "dev", "nestlet0").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%v: %s", err, out)
	}
	return string(out)
}

// coversAll reports whether each CIDR is inside a route of routes (`ip
// route` output); coversAny whether cidr overlaps some route.
func coversAll(routes string, cidrs []string) bool {
	for _, c := range cidrs {
		if !routeMatches(routes, c, func(route, cidr netip.Prefix) bool {
			return route.Bits() <= cidr.Bits() && route.Contains(cidr.Addr())
		}) {
			return false
		}
	}
	return true
}

func coversAny(routes string, cidr string) bool {
	return routeMatches(routes, cidr, netip.Prefix.Overlaps)
}

func routeMatches(routes, cidr string, match func(route, cidr netip.Prefix) bool) bool {
	c, err := netip.ParsePrefix(cidr)
	if err != nil {
		return false
	}
	for line := range strings.Lines(routes) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		r, err := netip.ParsePrefix(f[0])
		if err != nil {
			if a, aerr := netip.ParseAddr(f[0]); aerr == nil {
				r = netip.PrefixFrom(a, a.BitLen())
			} else {
				continue
			}
		}
		if match(r, c.Masked()) {
			return true
		}
	}
	return false
}
