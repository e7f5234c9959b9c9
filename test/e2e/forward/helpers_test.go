package forward

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// deployment is a plain Deployment pinned to a region: no toleration, no
// scheduler name, as a user writes it.
func deployment(ns, name string, replicas int32, region string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"topology.kubernetes.io/region": region},
					Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
				},
			},
		},
	}
}

// pods lists the pods of namespace ns in cluster.
func pods(t *testing.T, cluster, ns string, selector string) []corev1.Pod {
	t.Helper()
	list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	return list.Items
}

// waitPods waits until ok holds for the pods of ns in cluster.
func waitPods(t *testing.T, cluster, ns, selector string, timeout time.Duration, ok func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var last []corev1.Pod
	framework.Eventually(t, timeout, fmt.Sprintf("pods of %s in %s: condition met", ns, cluster), func(ctx context.Context) (bool, string) {
		list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		last = list.Items
		phases := map[corev1.PodPhase]int{}
		for _, p := range last {
			phases[p.Status.Phase]++
		}
		return ok(list.Items), fmt.Sprintf("%d pods, phases %v", len(last), phases)
	})
	return last
}

func countRunning(ps []corev1.Pod) int {
	n := 0
	for _, p := range ps {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// delegates returns the delegates in cluster (pods carrying an origin).
func delegates(t *testing.T, cluster, ns string) []corev1.Pod {
	t.Helper()
	return pods(t, cluster, ns, api.LabelTargetUID)
}
