package tree

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// A namespace limited to region east at the root (its annotation
// nestlet.io/clusters, docs/tenants.md): a Deployment there that asks for
// west stays Pending, with the policy's reason and none Failed; one that
// asks for no region runs, in east only.
func TestNamespaceLimitedToARegion(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	n, err := root.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[api.AnnotationNamespaceClusters] = "topology.kubernetes.io/region=east"
	_, err = root.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)

	deployment(t, ns, "to-west", 2, func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"topology.kubernetes.io/region": "west"} })
	deployment(t, ns, "anywhere", 2, func(*corev1.PodSpec) {})
	_, leavesOf, _ := placed(t, ns, "anywhere", 2)
	for _, l := range leavesOf {
		require.True(t, strings.HasPrefix(l, "east-"), "a pod of the namespace runs in %s", l)
	}
	framework.Eventually(t, 2*time.Minute, "to-west's pods Pending with the namespace's reason", func(ctx context.Context) (bool, string) {
		list, err := root.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=to-west"})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != 2 {
			return false, fmt.Sprintf("%d pods", len(list.Items))
		}
		for _, p := range list.Items {
			require.NotEqual(t, corev1.PodFailed, p.Status.Phase, "%s: %s", p.Name, p.Status.Message)
			msg := ""
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					msg = c.Message
				}
			}
			if p.Spec.NodeName != "" || !strings.Contains(msg, "only to clusters matching topology.kubernetes.io/region=east") {
				return false, fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, msg)
			}
		}
		return true, ""
	})
}
