package forward

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// A 60-replica Deployment pinned to region east runs entirely in east's
// leaves, two levels down, and the root sees every pod Running on node east.
func TestDeploymentRunsTwoLevelsDown(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root")
	_, err := root.Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 60, "east"), metav1.CreateOptions{})
	require.NoError(t, err)

	start := time.Now()
	rootPods := waitPods(t, "root", ns, "app=web", 3*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 60 && len(ps) == 60 })
	t.Logf("60 pods Running at the root after %s", time.Since(start).Round(time.Millisecond))
	for _, p := range rootPods {
		require.Equal(t, "east", p.Spec.NodeName, p.Name)
		require.NotEmpty(t, p.Status.PodIP, "pod IP comes up from the leaf")
		require.NotNil(t, p.Status.StartTime)
	}

	// In east: one delegate per root pod, on east-1 or east-2.
	mid := delegates(t, "east", ns)
	require.Len(t, mid, 60)
	for _, d := range mid {
		require.Contains(t, []string{"east-1", "east-2"}, d.Spec.NodeName, d.Name)
		require.Equal(t, "root,east", d.Annotations[api.AnnotationPath])
		require.True(t, strings.HasPrefix(d.Annotations[api.AnnotationOrigin], "root/"), d.Annotations[api.AnnotationOrigin])
		ref := metav1.GetControllerOf(&d)
		require.NotNil(t, ref)
		require.Equal(t, "Target", ref.Kind)
	}
	// In the leaves: on kwok nodes, path root,east,<leaf>.
	total := 0
	for _, leafName := range []string{"east-1", "east-2"} {
		for _, d := range delegates(t, leafName, ns) {
			total++
			require.Equal(t, "root,east,"+leafName, d.Annotations[api.AnnotationPath])
			require.True(t, strings.HasPrefix(d.Spec.NodeName, leafName+"-"), d.Spec.NodeName)
			require.Equal(t, corev1.PodRunning, d.Status.Phase)
		}
	}
	require.Equal(t, 60, total, "one leaf pod per root pod")
	for _, w := range []string{"west", "west-1", "west-2"} {
		require.Empty(t, delegates(t, w, ns), "nothing in %s", w)
	}
}
