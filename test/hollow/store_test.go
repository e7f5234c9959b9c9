package hollow

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func newTestCluster(t *testing.T) *Cluster {
	t.Helper()
	c, err := NewCluster(ClusterConfig{Name: "store", Nodes: 1})
	require.NoError(t, err)
	return c
}

// TestStoreFieldSelectedWatch: a pod enters a spec.nodeName selector when
// it is bound (ADDED) and leaves a label selector when relabelled
// (DELETED), as with a real API server.
func TestStoreFieldSelectedWatch(t *testing.T) {
	ctx := t.Context()
	c := newTestCluster(t)
	pods := c.Client.CoreV1().Pods(metav1.NamespaceDefault)
	bound, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=store-node-0"})
	require.NoError(t, err)
	defer bound.Stop()
	labelled, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	defer labelled.Stop()

	p := pod("web", nil, "10m")
	p.Labels = map[string]string{"app": "web"}
	_, err = pods.Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, watch.Added, nextEvent(t, labelled).Type)

	require.NoError(t, pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
		Target: corev1.ObjectReference{Kind: "Node", Name: "store-node-0"}}, metav1.CreateOptions{}))
	ev := nextEvent(t, bound)
	require.Equal(t, watch.Added, ev.Type)
	require.Equal(t, "store-node-0", ev.Object.(*corev1.Pod).Spec.NodeName)
	require.Equal(t, watch.Modified, nextEvent(t, labelled).Type)

	cur, err := pods.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Labels["app"] = "db"
	_, err = pods.Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	ev = nextEvent(t, labelled)
	require.Equal(t, watch.Deleted, ev.Type)
	require.Equal(t, watch.Modified, nextEvent(t, bound).Type)

	// Binding twice, or moving a pod by update, is refused.
	err = pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
		Target: corev1.ObjectReference{Kind: "Node", Name: "elsewhere"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "second binding: %v", err)
	cur, err = pods.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Spec.NodeName = "elsewhere"
	_, err = pods.Update(ctx, cur, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "moving by update: %v", err)

	_, err = pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.image=x"})
	require.True(t, apierrors.IsBadRequest(err), "unsupported field: %v", err)
}

func TestStoreCreate(t *testing.T) {
	ctx := t.Context()
	c := newTestCluster(t)
	_, err := c.Client.CoreV1().ConfigMaps("missing").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsNotFound(err), "namespace must exist: %v", err)

	p := pod("", nil, "10m")
	p.GenerateName = "gen-"
	p.Status.Phase = corev1.PodRunning
	got, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Regexp(t, `^gen-[a-z0-9]{5}$`, got.Name)
	require.NotEmpty(t, got.UID)
	require.Equal(t, corev1.PodPending, got.Status.Phase)

	sec, err := c.Client.CoreV1().Secrets(metav1.NamespaceDefault).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		StringData: map[string]string{"token": "abc"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, []byte("abc"), sec.Data["token"])
	require.Empty(t, sec.StringData)

	ns, err := c.Client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, c.UID, ns.UID)
	require.NotEmpty(t, c.UID)
}

// TestStoreExpiredResourceVersion: a watch from a resourceVersion older
// than the kept history gets 410 Expired, so a reflector lists again.
func TestStoreExpiredResourceVersion(t *testing.T) {
	ctx := t.Context()
	c := newTestCluster(t)
	cms := c.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	first, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-0"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := 1; i <= historySize+1; i++ {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	require.True(t, apierrors.IsResourceExpired(err), "old resourceVersion: %v", err)
}
