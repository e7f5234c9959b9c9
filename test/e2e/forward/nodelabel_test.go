package forward

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/provider/summary"
	"github.com/nestlet/nestlet/test/framework"
)

// A label set on a virtual node at the root (`kubectl label node west
// team=...`) is the node's as in one cluster: a Deployment selecting it
// runs in that cluster, though no node below carries the label, and the
// delegates are made without the requirement (the conformance suite's
// "NodeSelector is respected if matching" does this).
func TestLabelOnVirtualNode(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	nodes := env.Cluster("root").Client.CoreV1().Nodes()
	key := "e2e.nestlet.io/team-" + ns
	patch := func(value any) {
		body := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, value)
		_, err := nodes.Patch(context.WithoutCancel(ctx), "west", types.MergePatchType, []byte(body), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	patch(`"blue"`)
	t.Cleanup(func() { patch("null") })

	d := deployment(ns, "labelled", 2, "west")
	d.Spec.Template.Spec.NodeSelector = map[string]string{key: "blue"}
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	running := waitPods(t, "root", ns, "app=labelled", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 2 })
	for _, p := range running {
		require.Equal(t, "west", p.Spec.NodeName, "%s runs on the node labelled", p.Name)
	}
	for _, p := range delegates(t, "west", ns) {
		require.NotContains(t, p.Spec.NodeSelector, key, "the delegate %s keeps the root's node label", p.Name)
	}
}

// An extended resource advertised on a virtual node at the root (a PATCH
// of its status capacity, as an admin does for a node, and as the
// conformance suite's preemption specs do) is the node's as in one
// cluster: the root's scheduler counts it there (three pods asking one
// each of three run, the fourth stays Pending for want of it), the agent's
// status writes keep it, and the delegates are made without the request,
// which no node below could meet.
func TestResourceOnVirtualNode(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	nodes := env.Cluster("root").Client.CoreV1().Nodes()
	res := corev1.ResourceName("e2e.nestlet.io/licence-" + ns)
	patch := func(value any) {
		body := fmt.Sprintf(`{"status":{"capacity":{%q:%s},"allocatable":{%q:%s}}}`, res, value, res, value)
		_, err := nodes.PatchStatus(context.WithoutCancel(ctx), "west", []byte(body))
		require.NoError(t, err)
	}
	patch(`"3"`)
	t.Cleanup(func() { patch("null") })

	d := deployment(ns, "licensed", 4, "west")
	one := corev1.ResourceList{res: resource.MustParse("1")}
	d.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	all := waitPods(t, "root", ns, "app=licensed", 2*time.Minute, func(ps []corev1.Pod) bool {
		pending := 0
		for _, p := range ps {
			if _, c := podutil.GetPodCondition(&p.Status, corev1.PodScheduled); p.Spec.NodeName == "" && c != nil && strings.Contains(c.Message, "Insufficient "+string(res)) {
				pending++
			}
		}
		return countRunning(ps) == 3 && pending == 1
	})
	for _, p := range all {
		if p.Spec.NodeName != "" {
			require.Equal(t, "west", p.Spec.NodeName, "%s runs on the node holding the resource", p.Name)
		}
	}
	for _, p := range delegates(t, "west", ns) {
		require.NotContains(t, p.Spec.Containers[0].Resources.Requests, res, "the delegate %s asks for the root's node's resource", p.Name)
	}
	n, err := nodes.Get(ctx, "west", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, n.Status.Allocatable, res, "the agent's status writes kept the admin's resource")
}

// Nodes added to a leaf and then removed: the root's virtual node of the
// leaf's parent grows by their capacity, then comes back to what it was,
// two levels up (each level's status posts follow the summary down as well
// as up).
func TestCapacityFollowsNodesTwoLevelsDown(t *testing.T) {
	ctx := t.Context()
	before := settledEast(ctx, t)
	leaf := env.Cluster("east-1")
	var added []string
	for i := range 2 {
		name := fmt.Sprintf("east-1-extra-%d-%d", i, time.Now().UnixNano()%1_000_000)
		_, err := leaf.AddNode(ctx, launcher.NodeOptions{Name: name, Capacity: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}})
		require.NoError(t, err)
		added = append(added, name)
	}
	framework.Eventually(t, 2*time.Minute, "the root sees east with east-1's added nodes", func(context.Context) (bool, string) {
		now := eastAllocatable(ctx, t)
		grown := now.Cpu().Cmp(*before.Cpu()) > 0
		return grown, fmt.Sprintf("east's allocatable %v, before %v", now, before)
	})
	for _, name := range added {
		require.NoError(t, leaf.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}))
	}
	waitEastAllocatable(ctx, t, before)
}

// eastAllocatable is the allocatable of the root's virtual node east: its
// CPU, memory and pods (a test may add an extended resource to a virtual
// node).
func eastAllocatable(ctx context.Context, tb testing.TB) corev1.ResourceList {
	tb.Helper()
	n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
	require.NoError(tb, err)
	return standard(n.Status.Allocatable)
}

// standard keeps the CPU, memory and pods of l.
func standard(l corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if q, ok := l[r]; ok {
			out[r] = q
		}
	}
	return out
}

// settledEast waits until the root's virtual node east counts both of
// east's children, Ready there, as east does (the sum of their
// allocatable: no pod is made in east but by the root), and returns it.
// Just after the tree starts, east may have reported before one of its
// children joined: a capacity read then is a moment's, not east's.
func settledEast(ctx context.Context, tb testing.TB) corev1.ResourceList {
	tb.Helper()
	var root corev1.ResourceList
	framework.Eventually(tb, 2*time.Minute, "the root counts both of east's children", func(ctx context.Context) (bool, string) {
		sum := corev1.ResourceList{}
		for _, name := range []string{"east-1", "east-2"} {
			n, err := env.Cluster("east").Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !summary.NodeReady(n) {
				return false, name + " is not Ready in east"
			}
			summary.AddTo(sum, standard(n.Status.Allocatable))
		}
		root = eastAllocatable(ctx, tb)
		return equality.Semantic.DeepEqual(root, sum), fmt.Sprintf("east's allocatable at the root %v, its children's in east %v", root, sum)
	})
	return root
}

// waitEastAllocatable waits until the root's virtual node east is back to
// the allocatable before (settledEast), once nodes added below are removed.
func waitEastAllocatable(ctx context.Context, tb testing.TB, before corev1.ResourceList) {
	tb.Helper()
	framework.Eventually(tb, 2*time.Minute, "the root sees east without the nodes added below", func(context.Context) (bool, string) {
		now := eastAllocatable(ctx, tb)
		return equality.Semantic.DeepEqual(now, before), fmt.Sprintf("east's allocatable %v, before %v", now, before)
	})
}
