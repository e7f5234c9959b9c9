package tree

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nestlet/nestlet/test/framework"
)

// TestLeafWarningsReachTheRoot: a pod made at the root names a
// PriorityClass only the root has, and has a readiness probe that always
// fails. It runs in east-1 (the class follows it down), and the kubelet's
// Unhealthy warnings there show on the pod at the root, as `kubectl
// describe pod` lists them.
func TestLeafWarningsReachTheRoot(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	class := "e2e-" + ns
	_, err := root.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000},
		metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = root.SchedulingV1().PriorityClasses().Delete(t.Context(), class, metav1.DeleteOptions{}) })
	spec := appSpec(map[string]string{"topology.kubernetes.io/zone": "east-1"})
	spec.PriorityClassName = class
	spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromInt(9) // nothing listens there
	_, err = root.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "never-ready"}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)

	var running time.Time
	framework.Eventually(t, 3*time.Minute, "never-ready Running at the root", func(context.Context) (bool, string) {
		p, err := root.CoreV1().Pods(ns).Get(ctx, "never-ready", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == corev1.PodRunning {
			running = time.Now()
			return true, ""
		}
		return false, fmt.Sprint(p.Status)
	})
	framework.Eventually(t, time.Minute, "the leaf's Unhealthy warning on the pod at the root", func(context.Context) (bool, string) {
		list, err := root.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "never-ready").String()})
		if err != nil {
			return false, err.Error()
		}
		seen := []string{}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "Unhealthy" {
				t.Logf("at the root %s after Running: %s %s: %s (from %s)", time.Since(running).Round(time.Millisecond), e.Type, e.Reason, e.Message, e.Source.Host)
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, fmt.Sprint(seen)
	})
	out := mustKubectl(t, "", "-n", ns, "describe", "pod", "never-ready")
	require.Contains(t, out, "Unhealthy")
	require.Contains(t, out, "Readiness probe failed")
}
