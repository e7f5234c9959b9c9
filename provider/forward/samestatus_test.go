package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
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
