package child

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// The node controller's first requests after a registration are answered
// once each, within the window, and only for a node just created; every
// other request reaches the parent.
func TestRegistrationSparesRepeats(t *testing.T) {
	ctx := t.Context()
	newClients := func() (*fake.Clientset, *clocktesting.FakeClock, *registration, nodesClient, leasesClient) {
		client := fake.NewClientset()
		clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		reg := &registration{clock: clock}
		return client, clock, reg, nodesClient{NodeInterface: client.CoreV1().Nodes(), r: reg},
			leasesClient{LeaseInterface: client.CoordinationV1().Leases(corev1.NamespaceNodeLease), r: reg}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child"}, Status: corev1.NodeStatus{Phase: corev1.NodeRunning}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: corev1.NamespaceNodeLease}}

	t.Run("fresh node", func(t *testing.T) {
		client, _, reg, nodes, leases := newClients()
		created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(t, err)
		reg.created(created)
		client.ClearActions()

		got, err := nodes.Get(ctx, "child", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, created, got)
		_, err = nodes.Patch(ctx, "child", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
		_, err = leases.Get(ctx, "child", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err))
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Len(t, client.Actions(), 1, "only the lease's creation reached the parent: %v", client.Actions())

		// Once each: the same requests again reach the parent.
		_, err = nodes.Get(ctx, "child", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = nodes.Patch(ctx, "child", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
		_, err = leases.Get(ctx, "child", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Len(t, client.Actions(), 5)
	})

	t.Run("after the window", func(t *testing.T) {
		client, clock, reg, nodes, leases := newClients()
		created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(t, err)
		reg.created(created)
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		require.NoError(t, err)
		clock.Step(freshWindow)
		client.ClearActions()
		_, err = nodes.Get(ctx, "child", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = leases.Get(ctx, "child", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Len(t, client.Actions(), 3)
	})

	t.Run("adopted node", func(t *testing.T) {
		client, _, _, nodes, leases := newClients()
		_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(t, err)
		client.ClearActions()
		_, err = nodes.Get(ctx, "child", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = leases.Get(ctx, "child", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err))
		require.Len(t, client.Actions(), 2, "nothing answered for a node not created by this run")
	})
}

// The node is created with the TTL controller's value for a small parent,
// which the controller then leaves alone; a value already there is kept.
func TestWithTTL(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Annotations: map[string]string{"a": "b"}}}
	out := withTTL(n)
	require.Equal(t, "0", out.Annotations[corev1.ObjectTTLAnnotationKey])
	require.Equal(t, "b", out.Annotations["a"])
	require.NotContains(t, n.Annotations, corev1.ObjectTTLAnnotationKey, "the node given was changed")
	out.Annotations[corev1.ObjectTTLAnnotationKey] = "15"
	require.Equal(t, "15", withTTL(out).Annotations[corev1.ObjectTTLAnnotationKey])
	require.Equal(t, "0", withTTL(&corev1.Node{}).Annotations[corev1.ObjectTTLAnnotationKey])
}

// The read before each status post is answered from the node as last seen
// (the watch of it, or the last post's answer), never an older version;
// before anything was seen, and after the node was found deleted, the
// parent is asked.
func TestStatusPostReadsTheNodeAsLastSeen(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	reg := &registration{clock: clocktesting.NewFakeClock(time.Now())}
	nodes := nodesClient{NodeInterface: client.CoreV1().Nodes(), r: reg}
	_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", ResourceVersion: "5"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	gets := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" {
				n++
			}
		}
		return n
	}

	_, err = nodes.Get(ctx, "child", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, gets(), "nothing seen yet: the parent is asked")

	patched, err := nodes.Patch(ctx, "child", types.StrategicMergePatchType, []byte(`{"status":{"phase":"Running"}}`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	got, err := nodes.Get(ctx, "child", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, gets(), "the post's answer serves the next read")
	require.Equal(t, corev1.NodeRunning, got.Status.Phase)

	// The watch brings a newer version; an older one is not taken.
	newer := patched.DeepCopy()
	newer.ResourceVersion = "100"
	newer.Labels = map[string]string{"decorated": "yes"}
	reg.observe(newer)
	older := patched.DeepCopy()
	older.ResourceVersion = "1"
	reg.observe(older)
	got, err = nodes.Get(ctx, "child", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "yes", got.Labels["decorated"])
	got.Labels["decorated"] = "changed by the caller"
	again, err := nodes.Get(ctx, "child", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "yes", again.Labels["decorated"], "each read gets its own copy")
	require.Equal(t, 1, gets())

	// Deleted in the parent: the post fails, and the next read asks.
	require.NoError(t, client.CoreV1().Nodes().Delete(ctx, "child", metav1.DeleteOptions{}))
	_, err = nodes.Patch(ctx, "child", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status")
	require.True(t, apierrors.IsNotFound(err))
	_, err = nodes.Get(ctx, "child", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
	require.Equal(t, 2, gets())
}
