package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestSameStatus(t *testing.T) {
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	sched := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}
	a := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{ready, sched}}
	b := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{sched, ready}}
	require.True(t, sameStatus(a, b), "conditions in another order")
	require.Equal(t, corev1.PodReady, a.Conditions[0].Type, "the caller's conditions keep their order")
	require.Equal(t, corev1.PodScheduled, b.Conditions[0].Type, "the caller's conditions keep their order")

	c := b
	c.Phase = corev1.PodPending
	require.False(t, sameStatus(a, c), "another phase")
	d := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{sched}}
	require.False(t, sameStatus(a, d), "a condition fewer")
}

// The parent pod's observed generation is its own latest once the
// delegate carries every change and its kubelet observed the delegate's
// latest (the delegate's generations count other writes), and stays as it
// was until then.
func TestObservedGenerationIsTheParents(t *testing.T) {
	parent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", Generation: 500},
		Spec:   corev1.PodSpec{ActiveDeadlineSeconds: ptr.To[int64](4501)},
		Status: corev1.PodStatus{ObservedGeneration: 1, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, ObservedGeneration: 1}}}}
	d := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", Generation: 7},
		Spec: corev1.PodSpec{ActiveDeadlineSeconds: ptr.To[int64](4501)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ObservedGeneration: 7,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: 7}}}}
	d.Labels, d.Annotations = map[string]string{}, map[string]string{}
	st := translateStatus(parent, d)
	require.EqualValues(t, 500, st.ObservedGeneration)
	require.EqualValues(t, 500, st.Conditions[0].ObservedGeneration)

	// The kubelet below has not observed the delegate's latest yet.
	d.Generation = 8
	st = translateStatus(parent, d)
	require.EqualValues(t, 1, st.ObservedGeneration)
	require.EqualValues(t, 1, st.Conditions[0].ObservedGeneration)

	// The delegate lags behind the parent pod.
	d.Generation = 7
	parent.Spec.ActiveDeadlineSeconds = ptr.To[int64](4500)
	st = translateStatus(parent, d)
	require.EqualValues(t, 1, st.ObservedGeneration)
}

// A condition set on the parent pod that the delegate has not (an
// eviction's DisruptionTarget at the parent) stays, but a kubelet's (a
// resize's, done below) goes with the delegate's; the delegate's own
// conditions win over the parent's of the same type.
func TestParentOnlyConditionsStay(t *testing.T) {
	parent := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue},
	}}}
	d := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Reason: "below"},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse},
	}}}
	got := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range translateStatus(parent, d).Conditions {
		_, dup := got[c.Type]
		require.False(t, dup, "one %s", c.Type)
		got[c.Type] = c
	}
	require.Equal(t, corev1.ConditionFalse, got[corev1.PodReady].Status, "the delegate's")
	require.Equal(t, "EvictionByEvictionAPI", got[corev1.DisruptionTarget].Reason, "the parent's, which the delegate has not")
	require.Empty(t, got[corev1.PodScheduled].Reason, "the parent's own scheduling")
	require.NotContains(t, got, corev1.PodResizeInProgress, "a resize the delegate no longer shows is over")
}
