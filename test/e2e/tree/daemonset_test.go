package tree

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/nestlet/nestlet/test/framework"
)

// The root of this tree is made only of clusters (PreferNoSchedule on its
// children's nodes): a DaemonSet runs there once per child (the upstream
// DaemonSet specs of TestConformanceAtTheRoot), but not one of its system
// namespaces, as kube-proxy or a CNI would be: the admission policy
// refuses its pods for the children's nodes, and the DaemonSet's events
// say why.
func TestSystemDaemonSetStaysOffTheChildren(t *testing.T) {
	namespace(t) // the tree is whole
	ctx := t.Context()
	root := env.Cluster("root").Client
	name := "e2e-ds-" + rand.String(6)
	labels := map[string]string{"app": name}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "app", Image: "nestlet.local/pause:v1"}}}}}}
	_, err := root.AppsV1().DaemonSets(metav1.NamespaceSystem).Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = root.AppsV1().DaemonSets(metav1.NamespaceSystem).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	framework.Eventually(t, time.Minute, "the DaemonSet controller is refused its pods for the children's nodes", func(ctx context.Context) (bool, string) {
		return framework.DaemonSetRefused(ctx, root, metav1.NamespaceSystem, name)
	})
	pods, err := root.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	for _, p := range pods.Items {
		require.NotContains(t, []string{"east", "west"}, p.Spec.NodeName, "a pod of the system DaemonSet on a child's node")
		if aff := p.Spec.Affinity; aff != nil && aff.NodeAffinity != nil && aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				for _, f := range term.MatchFields {
					for _, v := range f.Values {
						require.NotContains(t, []string{"east", "west"}, v, "a pod of the system DaemonSet made for a child's node: %s", p.Name)
					}
				}
			}
		}
	}
}
