package child

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// A virtual node that the parent marked unknown has its status posted
// again, at most once per repostEvery; a node Ready, or NotReady for a
// reason of its own, is left alone.
func TestWatchOwnNodeReposts(t *testing.T) {
	ready := func(status corev1.ConditionStatus, reason string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child"}, Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason}}}}
	}
	client := fake.NewClientset(ready(corev1.ConditionTrue, "ChildClusterReady"))
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var posts atomic.Int32
	markers := make(chan struct{}, 1)
	watchOwnNode(t.Context(), client, "child", clock, func() { posts.Add(1) }, func(n *corev1.Node) {
		if n.Status.Conditions[0].Reason == "Marker" {
			markers <- struct{}{}
		}
	})
	waitWatched(t, client, "nodes")
	update := func(n *corev1.Node) {
		t.Helper()
		_, err := client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	update(ready(corev1.ConditionFalse, "NoReadyNodeInChildCluster"))
	update(ready(corev1.ConditionUnknown, reasonStatusUnknown))
	require.Eventually(t, func() bool { return posts.Load() == 1 }, 5*time.Second, 10*time.Millisecond)
	update(ready(corev1.ConditionUnknown, reasonStatusUnknown+" "))
	update(ready(corev1.ConditionUnknown, reasonStatusUnknown))
	// One handler goroutine: once it has seen a later version, it has
	// decided about these.
	update(ready(corev1.ConditionTrue, "Marker"))
	select {
	case <-markers:
	case <-time.After(5 * time.Second):
		t.Fatal("the marker version never reached the handler")
	}
	require.Equal(t, int32(1), posts.Load(), "not again within repostEvery")
	clock.Step(repostEvery)
	update(ready(corev1.ConditionTrue, "ChildClusterReady"))
	update(ready(corev1.ConditionUnknown, reasonStatusUnknown))
	require.Eventually(t, func() bool { return posts.Load() == 2 }, 5*time.Second, 10*time.Millisecond)
}

// A virtual node deleted in the parent has its status posted (which
// registers it again, registration.go); after reregisterEvery, again.
func TestWatchOwnNodeRegistersADeletedNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child"}}
	client := fake.NewClientset(node.DeepCopy())
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var posts, seen atomic.Int32
	watchOwnNode(t.Context(), client, "child", clock, func() { posts.Add(1) }, func(*corev1.Node) { seen.Add(1) })
	require.Eventually(t, func() bool { return seen.Load() == 1 }, 5*time.Second, 10*time.Millisecond, "the watch has the node")
	waitWatched(t, client, "nodes")
	for round := int32(1); round <= 2; round++ {
		require.NoError(t, client.CoreV1().Nodes().Delete(t.Context(), "child", metav1.DeleteOptions{}))
		require.Eventually(t, func() bool { return posts.Load() == round }, 5*time.Second, 10*time.Millisecond, "round %d", round)
		_, err := client.CoreV1().Nodes().Create(t.Context(), node.DeepCopy(), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return seen.Load() == round+1 }, 5*time.Second, 10*time.Millisecond, "the watch has the node again")
		clock.Step(reregisterEvery)
	}
}

// waitWatched waits until client is watched for resource: a fake clientset
// drops what happens between an informer's list and its watch.
func waitWatched(t *testing.T, client *fake.Clientset, resource string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" && a.GetResource().Resource == resource {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "%s watched", resource)
}
