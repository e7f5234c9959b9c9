package kubeclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func TestCoreFactory(t *testing.T) {
	pod := func(name string, lbl map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: lbl,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "test"}}}}
	}
	client := fake.NewClientset(pod("mine", map[string]string{"owner": "me"}), pod("other", nil))
	f := NewCoreFactory(client, func(o *metav1.ListOptions) { o.LabelSelector = "owner=me" }, StripManagedFields)

	pods := f.CoreV1().Pods()
	assert.Same(t, pods.Informer(), f.CoreV1().Pods().Informer(), "one informer per type")
	nodes := f.CoreV1().Nodes()
	nodes.Informer() // informers are made before Start, as with client-go's factory

	stop := make(chan struct{})
	f.Start(stop)
	f.Start(stop) // already running: nothing more
	require.True(t, cache.WaitForCacheSync(t.Context().Done(), pods.Informer().HasSynced, nodes.Informer().HasSynced))

	list, err := pods.Lister().List(labels.Everything())
	require.NoError(t, err)
	require.Len(t, list, 1, "the tweak narrows the list")
	assert.Equal(t, "mine", list[0].Name)
	assert.Empty(t, list[0].ManagedFields, "the transform applies")

	close(stop)
	f.Shutdown()
}
