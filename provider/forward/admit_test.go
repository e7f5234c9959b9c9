package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// Which pods bound to the virtual node are forwarded: those of a trusted
// scheduler, those tolerating the virtual nodes' taint (exactly or through
// a wildcard), a DaemonSet's only where the parent relaxed the taint.
func TestAdmit(t *testing.T) {
	everything := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	exact := []corev1.Toleration{{Key: api.TaintKeyProvider, Operator: corev1.TolerationOpEqual, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}}
	otherKey := []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	daemon := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "log-agent", UID: "d", Controller: ptr.To(true)}}
	replicas := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "r", Controller: ptr.To(true)}}
	for _, tc := range []struct {
		name        string
		scheduler   string
		tolerations []corev1.Toleration
		owners      []metav1.OwnerReference
		daemonSets  bool   // the parent relaxed the taint
		refused     string // part of the message; "" when admitted
	}{
		{name: "trusted scheduler", scheduler: "nestlet-scheduler", owners: replicas},
		{name: "exact toleration", scheduler: "default-scheduler", tolerations: exact},
		{name: "tolerates everything", scheduler: "default-scheduler", tolerations: everything},
		{name: "bound by hand", scheduler: "default-scheduler", refused: "neither tolerates"},
		{name: "another taint tolerated", scheduler: "other", tolerations: otherKey, refused: `schedulerName "other"`},
		{name: "DaemonSet tolerating everything", scheduler: "default-scheduler", tolerations: everything, owners: daemon, refused: "DaemonSet log-agent"},
		{name: "DaemonSet of a trusted scheduler", scheduler: "nestlet-scheduler", owners: daemon, refused: "each cluster runs its own DaemonSets"},
		{name: "DaemonSet, taint relaxed", scheduler: "nestlet-scheduler", owners: daemon, daemonSets: true},
		{name: "DaemonSet, taint relaxed, bound by hand", scheduler: "default-scheduler", owners: daemon, daemonSets: true, refused: "neither tolerates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: tc.owners},
				Spec: corev1.PodSpec{SchedulerName: tc.scheduler, Tolerations: tc.tolerations}}
			why := admit(pod, DefaultTrustedSchedulers, tc.daemonSets)
			if tc.refused == "" {
				require.Empty(t, why)
				return
			}
			require.Contains(t, why, tc.refused)
		})
	}
}

// A pod refused is failed at once with an event, and no delegate or copy
// of its dependencies is made.
func TestNotAdmittedFailsWithAnEvent(t *testing.T) {
	pod := neverPod()
	pod.Spec.SchedulerName = "default-scheduler"
	pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}
	p, child, _, rec, got := runFailing(t, pod)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	out := <-got
	require.Equal(t, corev1.PodFailed, out.Status.Phase)
	require.Equal(t, api.ReasonNotAdmitted, out.Status.Reason)
	require.Contains(t, <-rec.Events, "Warning "+api.ReasonNotAdmitted+" pod neither tolerates")
	_, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no delegate: %v", err)
	_, err = child.CoreV1().Namespaces().Get(t.Context(), "app", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "nothing made below: %v", err)
}
