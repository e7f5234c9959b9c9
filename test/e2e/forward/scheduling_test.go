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

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// countOn counts the delegates in cluster (all namespaces) bound to node.
func countOn(t *testing.T, cluster, node string) int {
	t.Helper()
	n := 0
	for _, p := range delegates(t, cluster, "") {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

// In spread mode, east's scheduler balances replicas over its two children:
// each new replica goes to the emptier one, so the children end within one
// replica of each other (or, if earlier tests left them further apart than
// the new replicas can make up, every new replica narrows the gap).
func TestSpreadBalancesChildren(t *testing.T) {
	const replicas = 24
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	a0, b0 := countOn(t, "east", "east-1"), countOn(t, "east", "east-2")
	logChildren(t, "before")
	defer logChildren(t, "after")
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(t.Context(), deployment(ns, "spread", replicas, "east"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, "root", ns, "app=spread", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == replicas })
	a, b := countOn(t, "east", "east-1"), countOn(t, "east", "east-2")
	t.Logf("pods on east-1: %d -> %d, on east-2: %d -> %d", a0, a, b0, b)
	require.Equal(t, a0+b0+replicas, a+b, "every replica in east, and nothing else moved")
	require.LessOrEqual(t, abs(a-b), max(1, abs(a0-b0)-replicas), "east-1 has %d pods, east-2 %d (before: %d and %d)", a, b, a0, b0)
}

// logChildren records what east's scheduler sees of its two children.
func logChildren(t *testing.T, when string) {
	t.Helper()
	for _, name := range []string{"east-1", "east-2"} {
		n, err := env.Cluster("east").Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Logf("%s: %s: %v", when, name, err)
			continue
		}
		s, _ := api.ParseSummary(n)
		at := ""
		if s != nil {
			at = s.Time
		}
		t.Logf("%s: %s allocatable cpu=%s memory=%s pods=%s, summary time %s, avoid %q, taints %v", when, name,
			n.Status.Allocatable.Cpu(), n.Status.Allocatable.Memory(), n.Status.Allocatable.Pods(), at, n.Annotations[api.AnnotationAvoid], n.Spec.Taints)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// A DaemonSet at the root runs on the root's real node only: the taint
// keeps the DaemonSet controller off virtual nodes, and even a DaemonSet
// tolerating everything never gets a pod onto one.
func TestDaemonSetStaysOffVirtualNodes(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root")
	ds := func(name string, tolerations []corev1.Toleration) *appsv1.DaemonSet {
		labels := map[string]string{"ds": name}
		return &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Tolerations: tolerations, Containers: []corev1.Container{{Name: "agent", Image: "busybox"}}},
				},
			},
		}
	}
	for _, d := range []*appsv1.DaemonSet{ds("plain", nil), ds("tolerant", []corev1.Toleration{{Operator: corev1.TolerationOpExists}})} {
		_, err := root.Client.AppsV1().DaemonSets(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// Each runs on the real node.
	for _, name := range []string{"plain", "tolerant"} {
		waitPods(t, "root", ns, "ds="+name, time.Minute, func(ps []corev1.Pod) bool {
			for _, p := range ps {
				if p.Spec.NodeName == "root-node" && p.Status.Phase == corev1.PodRunning {
					return true
				}
			}
			return false
		})
	}
	// The tolerant one's pods for the virtual nodes are never made: the
	// children's admission policy (charts/nestlet/policies, which the
	// launcher installs) refuses them, and the DaemonSet controller says
	// so. (Without the policy, the scheduler leaves them unscheduled,
	// "DaemonSet pods do not go to virtual nodes": a unit test of the
	// plugin.)
	framework.Eventually(t, time.Minute, "the tolerant DaemonSet's pods for east and west refused by the policy", func(ctx context.Context) (bool, string) {
		d, err := root.Client.AppsV1().DaemonSets(ns).Get(ctx, "tolerant", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		refused, why := framework.DaemonSetRefused(ctx, root.Client, ns, "tolerant")
		return refused && d.Status.DesiredNumberScheduled == 3 && d.Status.CurrentNumberScheduled == 1,
			fmt.Sprintf("refused %t (%s), desired %d, scheduled %d", refused, why, d.Status.DesiredNumberScheduled, d.Status.CurrentNumberScheduled)
	})
	for _, p := range pods(t, "root", ns, "") {
		require.NotContains(t, []string{"east", "west"}, p.Spec.NodeName, "pod %s landed on a virtual node", p.Name)
	}
}
