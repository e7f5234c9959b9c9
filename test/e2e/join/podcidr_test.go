package join

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
)

// A child whose pod CIDRs overlap a sibling's says so on its Target, and
// says so no more once the overlap is gone; the parent grants the range to
// the child that held it first, and the other's Target says it is refused.
func TestOverlappingPodCIDRsReported(t *testing.T) {
	ctx := t.Context()
	condition := func(want metav1.ConditionStatus) metav1.Condition {
		t.Helper()
		var got metav1.Condition
		err := env.Cluster("west").WaitTarget(ctx, targetOf["west"], time.Minute, func(tg *v1alpha1.Target) bool {
			got = launcher.TargetCondition(tg, v1alpha1.ConditionPodCIDRsDistinct)
			return got.Status == want
		})
		require.NoError(t, err, "west's %s condition: %+v", v1alpha1.ConditionPodCIDRsDistinct, got)
		return got
	}
	ok := condition(metav1.ConditionTrue)
	require.Equal(t, v1alpha1.ReasonPodCIDRsDistinct, ok.Reason)
	t.Logf("distinct: %s", ok.Message)

	// A new node in west takes the pod CIDR of one of east's nodes.
	east1, err := env.Cluster("east").Client.CoreV1().Nodes().Get(ctx, "east-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, east1.Spec.PodCIDR)
	_, err = env.Cluster("west").AddNode(ctx, launcher.NodeOptions{Name: "west-clash", PodCIDR: east1.Spec.PodCIDR,
		Labels: map[string]string{"topology.kubernetes.io/region": "west"}})
	require.NoError(t, err)
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = env.Cluster("west").Client.CoreV1().Nodes().Delete(ctx, "west-clash", metav1.DeleteOptions{})
		}
	})
	clash := condition(metav1.ConditionFalse)
	require.Equal(t, v1alpha1.ReasonPodCIDROverlap, clash.Reason)
	require.Contains(t, clash.Message, east1.Spec.PodCIDR)
	require.Contains(t, clash.Message, "cluster east")
	require.Contains(t, clash.Message, "give every joined cluster its own pod CIDR")
	t.Logf("overlap: %s", clash.Message)
	// The root granted east that range first: west is refused it, east
	// keeps it.
	granted := targetGranted(t, "west", metav1.ConditionFalse)
	require.Equal(t, v1alpha1.ReasonPodCIDRsRefused, granted.Reason)
	require.Contains(t, granted.Message, east1.Spec.PodCIDR+" (held by cluster east)")
	t.Logf("refused: %s", granted.Message)
	targetGranted(t, "east", metav1.ConditionTrue)

	require.NoError(t, env.Cluster("west").Client.CoreV1().Nodes().Delete(ctx, "west-clash", metav1.DeleteOptions{}))
	removed = true
	condition(metav1.ConditionTrue)
	targetGranted(t, "west", metav1.ConditionTrue)
}

// targetGranted waits until child's Target says want of its pod CIDRs
// being granted (ConditionPodCIDRsGranted), and returns the condition.
func targetGranted(t *testing.T, child string, want metav1.ConditionStatus) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	err := env.Cluster(child).WaitTarget(t.Context(), targetOf[child], time.Minute, func(tg *v1alpha1.Target) bool {
		got = launcher.TargetCondition(tg, v1alpha1.ConditionPodCIDRsGranted)
		return got.Status == want
	})
	require.NoError(t, err, "%s's %s condition: %+v", child, v1alpha1.ConditionPodCIDRsGranted, got)
	return got
}
