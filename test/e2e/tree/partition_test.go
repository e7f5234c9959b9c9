package tree

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestLeafCutOffThenHeals: a Deployment at the root pinned to region east
// runs in east-1 (east-2 cordoned in east while it starts). The WAN between
// east-1 and east is cut for longer than east's grace period: east declares
// east-1 unreachable and evicts its pods there; the root's pods fail
// (their delegates were deleted below, as a kubelet's evicted pods fail)
// and the root's ReplicaSet replaces them, in east-2, while east-1 keeps
// running its containers, cut off as a kubelet keeps its pods. After the
// heal, east-1 deletes exactly the pods whose parents are gone: the
// replicas converge to the Deployment's count, all in east-2, one chain
// each, and east-1 is Ready again.
func TestLeafCutOffThenHeals(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	east := env.Cluster("east").Client
	cordon := func(on bool) error {
		_, err := east.CoreV1().Nodes().Patch(ctx, "east-2", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"unschedulable":%v}}`, on), metav1.PatchOptions{})
		return err
	}
	require.NoError(t, cordon(true))
	defer func() { _ = cordon(false) }()

	const replicas = 2
	labels := map[string]string{"app": "cut"}
	spec := appSpec(map[string]string{"topology.kubernetes.io/region": "east"})
	for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)})
	}
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cut"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	settle(t, ns, replicas, "east-1", 3*time.Minute)
	before := livePods(t, "east-1", ns)
	require.NoError(t, cordon(false))

	link := tree.Link("east-1", "east")
	require.NoError(t, link.Cut())
	cut := time.Now()
	defer func() { _ = link.Restore() }()
	framework.Eventually(t, 3*time.Minute, "east replaces east-1's pods in east-2", func(context.Context) (bool, string) {
		n := len(livePods(t, "east-2", ns))
		return n == replicas, fmt.Sprintf("east-2 runs %d of %d", n, replicas)
	})
	t.Logf("replaced in east-2 %s after the cut", time.Since(cut).Round(time.Second))
	require.Equal(t, before, livePods(t, "east-1", ns), "east-1 keeps running its pods while cut off")

	require.NoError(t, link.Restore())
	healed := time.Now()
	settle(t, ns, replicas, "east-2", 3*time.Minute)
	t.Logf("converged %s after the heal", time.Since(healed).Round(time.Millisecond))
	list, err := env.Cluster("root").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	failed := 0
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodFailed {
			failed++
			require.NotEmpty(t, p.Status.Reason, "root pod %s failed without a reason: %s", p.Name, p.Status.Message)
			t.Logf("root pod %s: %s: %s", p.Name, p.Status.Reason, p.Status.Message)
		}
	}
	require.Equal(t, replicas, failed, "the root's pods that ran in east-1 failed, no other")
	framework.Eventually(t, time.Minute, "east-1 Ready in east, untainted", func(context.Context) (bool, string) {
		n, err := east.CoreV1().Nodes().Get(ctx, "east-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady {
				return false, fmt.Sprint(n.Spec.Taints)
			}
		}
		return launcher.NodeReady(n), fmt.Sprint(n.Status.Conditions)
	})
}

// livePods returns the pods of ns in cluster that are Running and not
// being deleted, by name and UID.
func livePods(t *testing.T, cluster, ns string) map[string]types.UID {
	t.Helper()
	list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	live := map[string]types.UID{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			live[p.Name] = p.UID
		}
	}
	return live
}

// settle waits until the root has want live pods in ns (terminal ones
// aside), Ready, none being deleted, each running in leaf by one chain of
// delegates, and no cluster below holds any other pod of ns: no orphan, no
// duplicate.
func settle(t *testing.T, ns string, want int, leaf string, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("%d pods of %s, all in %s, nothing else", want, ns, leaf), func(context.Context) (bool, string) {
		ctx := t.Context()
		list, err := env.Cluster("root").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var live []*corev1.Pod
		for i := range list.Items {
			if p := &list.Items[i]; p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
				live = append(live, p)
			}
		}
		if len(live) != want {
			return false, fmt.Sprintf("the root has %d live pods", len(live))
		}
		chains := map[string]int{}
		for _, p := range live {
			if p.DeletionTimestamp != nil || !podutil.IsPodReady(p) {
				return false, fmt.Sprintf("root pod %s: Ready %v, deleting %v", p.Name, podutil.IsPodReady(p), p.DeletionTimestamp != nil)
			}
			runsIn, _, err := leafOf(ctx, p)
			if err != nil {
				return false, err.Error()
			}
			if runsIn != leaf {
				return false, fmt.Sprintf("%s runs in %s", p.Name, runsIn)
			}
			chains[p.Spec.NodeName]++
		}
		// One delegate per pod of the level above, everywhere.
		for _, c := range []string{"east", "east-1", "east-2", "west", "west-1", "west-2"} {
			l, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			want := map[string]int{"east": want, leaf: want}[c]
			if len(l.Items) != want {
				names := map[string]string{}
				for _, p := range l.Items {
					names[p.Name] = string(p.Status.Phase)
				}
				return false, fmt.Sprintf("%s holds %d pods of %s, want %d: %v", c, len(l.Items), ns, want, names)
			}
		}
		return maps.Equal(chains, map[string]int{"east": want}), fmt.Sprint(chains)
	})
}
