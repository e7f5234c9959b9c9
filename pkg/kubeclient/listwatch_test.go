package kubeclient

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestStripManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	got, err := StripManagedFields(pod)
	require.NoError(t, err)
	require.Nil(t, got.(*corev1.Pod).ManagedFields)
	require.Equal(t, map[string]string{"a": "b"}, got.(*corev1.Pod).Labels)

	// Anything without object metadata passes unchanged.
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}
	got, err = StripManagedFields(tomb)
	require.NoError(t, err)
	require.Equal(t, tomb, got)
}
