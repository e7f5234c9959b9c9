package child

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// A status post carries the pod's metadata as last seen, not the metadata
// of the pod the forwarder sent earlier: a grace period shortened since
// (the parent pod removed once its delegate was gone) or a finalizer taken
// off since would otherwise be refused, or put back.
func TestStatusPostCarriesTheCurrentMetadata(t *testing.T) {
	now := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-1", Namespace: "app", UID: "u1", ResourceVersion: "9",
		DeletionTimestamp: ptr.To(metav1.Now()), DeletionGracePeriodSeconds: ptr.To[int64](0)}}
	client := fake.NewClientset(now.DeepCopy())
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(now))
	pods := currentMeta{PodsGetter: client.CoreV1(), pods: corelisters.NewPodLister(indexer)}

	sent := now.DeepCopy()
	sent.ResourceVersion = "7"
	sent.DeletionGracePeriodSeconds = ptr.To[int64](1)
	sent.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	sent.Status.Phase = corev1.PodFailed
	_, err := pods.Pods("app").UpdateStatus(t.Context(), sent, metav1.UpdateOptions{})
	require.NoError(t, err)

	var posted *corev1.Pod
	for _, a := range client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" {
			posted = u.GetObject().(*corev1.Pod)
		}
	}
	require.NotNil(t, posted)
	require.Equal(t, corev1.PodFailed, posted.Status.Phase, "the status is the forwarder's")
	require.Equal(t, int64(0), *posted.DeletionGracePeriodSeconds)
	require.Empty(t, posted.Finalizers)
	require.Equal(t, "9", posted.ResourceVersion)
	require.Equal(t, int64(1), *sent.DeletionGracePeriodSeconds, "the caller's pod is left as it was")

	// A pod not seen keeps the server's grace period.
	client.ClearActions()
	other := sent.DeepCopy()
	other.Name, other.UID = "job-2", "u2"
	_, _ = pods.Pods("app").UpdateStatus(t.Context(), other, metav1.UpdateOptions{})
	for _, a := range client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			require.Nil(t, u.GetObject().(*corev1.Pod).DeletionGracePeriodSeconds)
		}
	}
}
