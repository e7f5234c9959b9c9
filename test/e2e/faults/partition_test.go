package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// deployment runs replicas over both regions, evicted 5 s after their node
// becomes unreachable (300 s by default).
func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	tolerate := func(key string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
							Key: "topology.kubernetes.io/region", Operator: corev1.NodeSelectorOpIn, Values: []string{"east", "west"}}}}}}}},
					Tolerations: []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable), tolerate(corev1.TaintNodeNotReady)},
					Containers:  []corev1.Container{{Name: "app", Image: "nginx"}},
				},
			},
		},
	}
}

// namespace makes a namespace at the root for the test
// (framework.KeptNamespace), once both children are Ready there without
// a taint of the node lifecycle: a test starts on a whole tree whatever
// the one before it left. Its pods are watched in every cluster until the
// test ends, which fails on any pod run twice at once (reportFaults).
func namespace(t *testing.T) string {
	t.Helper()
	return namespaceExpecting(t, 0)
}

// namespaceExpecting is namespace for a test that causes duplicates on
// purpose: exactly that many must be counted.
func namespaceExpecting(t *testing.T, duplicates int) string {
	t.Helper()
	ns, _ := namespaceWatched(t, duplicates)
	return ns
}

// namespaceWatched is namespaceExpecting, with the watch of its pods.
func namespaceWatched(t *testing.T, duplicates int) (string, *framework.FaultWatch) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "the tree is whole", func(ctx context.Context) (bool, string) {
		for _, child := range []string{"east", "west"} {
			n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, child, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !launcher.NodeReady(n) {
				return false, child + " is not Ready at the root"
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady {
					return false, child + " is tainted " + taint.Key
				}
			}
			// Its agent answers the root's scheduler (a reservation
			// withdrawn for no pod: 204): a child whose tunnel is still
			// coming back would be passed over for a few seconds.
			err = env.Cluster("root").Client.CoreV1().RESTClient().Delete().
				AbsPath("/api/v1/nodes", child, "proxy", api.ReservePath, child, "probe", "probe").Do(ctx).Error()
			if err != nil {
				return false, child + "'s agent does not answer through nodes/proxy: " + err.Error()
			}
		}
		return true, ""
	})
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	w := watchFaults(t, ns)
	reportFaults(t, w, duplicates)
	return ns, w
}

// podsOf returns the pods of ns in cluster: live (not terminating, not
// ended) by name and UID, and how many are terminating.
func podsOf(ctx context.Context, cluster, ns string) (live map[string]string, terminating int, err error) {
	list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, err
	}
	live = map[string]string{}
	for _, p := range list.Items {
		switch {
		case p.DeletionTimestamp != nil:
			terminating++
		case p.Status.Phase == corev1.PodRunning:
			live[p.Name] = string(p.UID)
		}
	}
	return live, terminating, nil
}

// settle waits until the root runs want pods, none terminating, and the
// leaves run exactly one delegate for each: no orphan, no duplicate. It
// returns the root's pods by node.
func settle(t testing.TB, ns string, want int, timeout time.Duration) map[string]int {
	t.Helper()
	var byNode map[string]int
	framework.Eventually(t, timeout, "settled", func(ctx context.Context) (bool, string) {
		list, err := env.Cluster("root").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		byNode = map[string]int{}
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("root pod %s: phase %s, deleting %v", p.Name, p.Status.Phase, p.DeletionTimestamp != nil)
			}
			byNode[p.Spec.NodeName]++
		}
		if len(list.Items) != want {
			return false, fmt.Sprintf("root has %d pods, want %d", len(list.Items), want)
		}
		for _, leaf := range []string{"east", "west"} {
			live, terminating, err := podsOf(ctx, leaf, ns)
			if err != nil {
				return false, err.Error()
			}
			if len(live) != byNode[leaf] || terminating > 0 {
				return false, fmt.Sprintf("%s runs %d delegates (%d terminating), the root has %d pods there", leaf, len(live), terminating, byNode[leaf])
			}
		}
		return true, ""
	})
	return byNode
}

// A partition shorter than the root's grace period changes nothing: no pod
// is deleted or replaced anywhere, and the child stays Ready.
func TestShortPartitionChangesNothing(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "web", 6), metav1.CreateOptions{})
	require.NoError(t, err)
	settle(t, ns, 6, 2*time.Minute)
	rootBefore, _, err := podsOf(ctx, "root", ns)
	require.NoError(t, err)
	eastBefore, _, err := podsOf(ctx, "east", ns)
	require.NoError(t, err)
	require.NotEmpty(t, eastBefore, "some replicas run in east")

	link := tree.Link("east", "root")
	require.NoError(t, link.Cut())
	time.Sleep(graceSeconds / 2 * time.Second) // half the grace period: a blip
	require.NoError(t, link.Restore())
	healed := time.Now()

	settle(t, ns, 6, time.Minute)
	t.Logf("settled %s after the heal", time.Since(healed).Round(time.Millisecond))
	rootAfter, _, err := podsOf(ctx, "root", ns)
	require.NoError(t, err)
	eastAfter, _, err := podsOf(ctx, "east", ns)
	require.NoError(t, err)
	require.Equal(t, rootBefore, rootAfter, "the root's pods are the same pods")
	require.Equal(t, eastBefore, eastAfter, "east's delegates are the same pods")
	node, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(t, err)
	for _, taint := range node.Spec.Taints {
		require.NotEqual(t, corev1.TaintNodeUnreachable, taint.Key, "east was never declared unreachable")
	}
}

// A partition longer than the grace period: the root declares east
// unreachable and replaces its pods in west, while east keeps running its
// delegates, cut off as a kubelet keeps its pods. After the heal, east
// deletes exactly the delegates whose root pods are gone: the replicas
// running in all leaves converge to the Deployment's count.
func TestLongPartitionReplacesThenConverges(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const replicas = 6
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "api", replicas), metav1.CreateOptions{})
	require.NoError(t, err)
	before := settle(t, ns, replicas, 2*time.Minute)
	require.NotZero(t, before["east"], "some replicas run in east: %v", before)
	eastBefore, _, err := podsOf(ctx, "east", ns)
	require.NoError(t, err)

	link := tree.Link("east", "root")
	require.NoError(t, link.Cut())
	cut := time.Now()
	defer func() { _ = link.Restore() }()

	// The root replaces east's pods in west.
	framework.EventuallyEvery(t, 500*time.Millisecond, 2*time.Minute, fmt.Sprintf("west runs all %d replicas while east is cut off", replicas), func(ctx context.Context) (bool, string) {
		live, _, err := podsOf(ctx, "west", ns)
		if err != nil {
			return false, err.Error()
		}
		return len(live) == replicas, fmt.Sprintf("%d running", len(live))
	})
	t.Logf("replaced in west %s after the cut", time.Since(cut).Round(time.Second))
	eastDuring, _, err := podsOf(ctx, "east", ns)
	require.NoError(t, err)
	require.Equal(t, eastBefore, eastDuring, "east keeps running its delegates while cut off")

	require.NoError(t, link.Restore())
	healed := time.Now()
	after := settle(t, ns, replicas, 2*time.Minute)
	t.Logf("converged %s after the heal: %v", time.Since(healed).Round(time.Millisecond), after)
	require.Equal(t, map[string]int{"west": replicas}, after, "every replica in west, none left in east")

	// East's node is Ready again, and the root's controllers made exactly
	// one replacement per lost pod: one ReplicaSet, its pods all live.
	framework.EventuallyEvery(t, 500*time.Millisecond, time.Minute, "east Ready again after the heal", func(ctx context.Context) (bool, string) {
		n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready %s", c.Status)
			}
		}
		return false, "no Ready condition"
	})
	westPods, _, err := podsOf(ctx, "west", ns)
	require.NoError(t, err)
	names := slices.Sorted(maps.Keys(westPods))
	for _, name := range names {
		p, err := env.Cluster("west").Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "root,west", p.Annotations[api.AnnotationPath])
	}
}
