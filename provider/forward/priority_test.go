package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A pod naming a PriorityClass this cluster lacks gets it created here with
// the value the parent resolved; a class this cluster has keeps its own.
func TestPriorityClassFollowsThePod(t *testing.T) {
	pod := neverPod()
	pod.Spec.PriorityClassName = "batch-high"
	pod.Spec.Priority = ptr.To(int32(5000))
	pod.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	p, child, _, _, _ := runFailing(t, pod)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	pc, err := child.SchedulingV1().PriorityClasses().Get(t.Context(), "batch-high", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(5000), pc.Value)
	require.Equal(t, corev1.PreemptNever, *pc.PreemptionPolicy)
	d, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "batch-high", d.Spec.PriorityClassName)
	require.Nil(t, d.Spec.Priority, "admission here computes it")

	// This cluster's own class of that name stays as its admin made it.
	other := neverPod()
	other.Name, other.UID = "job-2", "u2"
	other.Spec.PriorityClassName = "theirs"
	other.Spec.Priority = ptr.To(int32(7))
	p, child, _, _, _ = runFailing(t, other)
	_, err = child.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Value: 100}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, p.CreatePod(t.Context(), other.DeepCopy()))
	pc, err = child.SchedulingV1().PriorityClasses().Get(t.Context(), "theirs", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(100), pc.Value)
}
