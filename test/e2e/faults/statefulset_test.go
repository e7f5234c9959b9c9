package faults

import (
	"context"
	"fmt"
	"strings"
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

// statefulSet runs one replica in region east, updated only when its pod
// is deleted (OnDelete), evicted 5 s after its node becomes unreachable.
func statefulSet(ns, name string) *appsv1.StatefulSet {
	d := deployment(ns, name, 1)
	spec := d.Spec.Template.Spec
	spec.Affinity = regions("east")
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To[int32](1),
			Selector:       d.Spec.Selector,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template:       corev1.PodTemplateSpec{ObjectMeta: d.Spec.Template.ObjectMeta, Spec: spec},
		},
	}
}

// regions requires one of the regions.
func regions(values ...string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "topology.kubernetes.io/region", Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
}

// runningDelegates maps each root pod name of ns to the origins
// ("root/<uid>") of its live delegates in east and west, by leaf.
func runningDelegates(ctx context.Context, ns string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, leaf := range []string{"east", "west"} {
		list, err := env.Cluster(leaf).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, d := range list.Items {
			if d.DeletionTimestamp != nil || d.Status.Phase != corev1.PodRunning {
				continue
			}
			parent := strings.TrimPrefix(d.Annotations[api.AnnotationParentPod], ns+"/")
			out[parent] = append(out[parent], leaf+":"+d.Annotations[api.AnnotationOrigin])
		}
	}
	return out, nil
}

// A StatefulSet pod of a cut-off child is not replaced while the child is
// unreachable (it stays Terminating at the root, as on a partitioned node),
// so it runs once. Force-deleting it at the root opens the window that
// Kubernetes documents for a partitioned node: the StatefulSet makes it
// again elsewhere (west, once allowed) while the cut-off child still runs
// the old one. After the heal the child deletes the old one: the ordinal
// runs exactly once, as the root's pod of that name. The fault watch
// counts that window, and only it: one pod with two delegates alive at
// once.
func TestStatefulSetRunsOnceAfterHeal(t *testing.T) {
	ctx := t.Context()
	ns := namespaceExpecting(t, 1)
	const replicas = 1
	root := env.Cluster("root").Client
	_, err := root.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, "db"), metav1.CreateOptions{})
	require.NoError(t, err)
	byNode := settle(t, ns, replicas, 2*time.Minute)
	require.Equal(t, map[string]int{"east": 1}, byNode)
	inEast, err := root.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
	require.NoError(t, err)

	link := tree.Link("east", "root")
	require.NoError(t, link.Cut())
	defer func() { _ = link.Restore() }()
	// Evicted at the root: Terminating, not replaced, while east runs it.
	framework.Eventually(t, 2*time.Minute, inEast.Name+" evicted from the unreachable east", func(ctx context.Context) (bool, string) {
		p, err := root.CoreV1().Pods(ns).Get(ctx, inEast.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.DeletionTimestamp != nil, "not deleting"
	})
	for range 3 { // a few reconciliations of the StatefulSet controller
		p, err := root.CoreV1().Pods(ns).Get(ctx, inEast.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, inEast.UID, p.UID, "not replaced while its node is unreachable")
		running, err := runningDelegates(ctx, ns)
		require.NoError(t, err)
		require.Len(t, running[inEast.Name], 1, "runs once while cut off: %v", running)
		time.Sleep(2 * time.Second)
	}

	// The documented window: an operator lets it run in west too and
	// force-deletes it (the new template applies to the pod made again).
	sts, err := root.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	sts.Spec.Template.Spec.Affinity = regions("east", "west")
	_, err = root.AppsV1().StatefulSets(ns).Update(ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, root.CoreV1().Pods(ns).Delete(ctx, inEast.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	var twice []string
	framework.Eventually(t, 2*time.Minute, "made again in west while east still runs the old one", func(ctx context.Context) (bool, string) {
		running, err := runningDelegates(ctx, ns)
		twice = running[inEast.Name]
		return err == nil && len(twice) == 2, fmt.Sprint(twice, err)
	})
	t.Logf("during the partition, after a force delete, %s runs in: %v", inEast.Name, twice)

	require.NoError(t, link.Restore())
	healed := time.Now()
	settle(t, ns, replicas, 2*time.Minute)
	t.Logf("converged %s after the heal", time.Since(healed).Round(time.Millisecond))
	running, err := runningDelegates(ctx, ns)
	require.NoError(t, err)
	pods, err := root.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, replicas)
	for _, p := range pods.Items {
		require.Len(t, running[p.Name], 1, "%s runs exactly once after the heal: %v", p.Name, running)
		require.True(t, strings.HasSuffix(running[p.Name][0], fmt.Sprintf("root/%s", p.UID)), "%s runs as the root's current pod: %v", p.Name, running[p.Name])
	}
}
