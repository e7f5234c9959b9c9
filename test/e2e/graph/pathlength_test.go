package graph

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

// At east, a west pod has two ways: west-1, a direct child with west
// nodes, and root, whose summary offers the same region two levels further
// down. Every replica takes the short one.
func TestShorterPathTaken(t *testing.T) {
	ctx := t.Context()
	east := env.Cluster("east").Client
	// Both ways are open: root's summary at east offers region west, two
	// levels below root.
	framework.Eventually(t, time.Minute, "east's node root offers region west two levels down", func(ctx context.Context) (bool, string) {
		n, err := east.CoreV1().Nodes().Get(ctx, "root", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s, ok := api.ParseSummary(n)
		if !ok {
			return false, "no summary"
		}
		for _, g := range s.Groups {
			if g.Labels["topology.kubernetes.io/region"] == "west" && g.Depth == 2 && g.Nodes > 0 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("groups %+v", s.Groups)
	})

	ns := framework.KeptNamespace(t, east, "t")
	labels := map[string]string{"app": "near"}
	const replicas = 6
	_, err := east.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "near"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"topology.kubernetes.io/region": "west"},
				Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
			}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var nodes map[string]int
	framework.Eventually(t, 2*time.Minute, "the replicas running at east", func(ctx context.Context) (bool, string) {
		list, err := east.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		nodes = map[string]int{}
		running := 0
		for _, p := range list.Items {
			nodes[p.Spec.NodeName]++
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == replicas, fmt.Sprintf("%d running; by node: %v", running, nodes)
	})
	require.Equal(t, map[string]int{"west-1": replicas}, nodes, "every replica goes to west-1 directly, none through root")
	leafPods, err := env.Cluster("west-1").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, leafPods.Items, replicas)
	for _, p := range leafPods.Items {
		require.Equal(t, "east,west-1", p.Annotations[api.AnnotationPath], p.Name)
	}
}
