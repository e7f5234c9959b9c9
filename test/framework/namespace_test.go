package framework

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func namespaceExists(t *testing.T, c kubernetes.Interface, ns string) bool {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// A namespace of the test's own, of the same name in every cluster given
// (kept where it is already), deleted in each when the test ends; or left
// there (KeptNamespace).
func TestNamespace(t *testing.T) {
	root, leaf := fake.NewClientset(), fake.NewClientset()
	var first, second, kept string
	t.Run("test", func(t *testing.T) {
		first = Namespace(t, root, "t", leaf)
		second = Namespace(t, root, "t")
		kept = KeptNamespace(t, root, "t", leaf)
		require.Regexp(t, `^t-[a-z0-9]{5}$`, first)
		require.NotEqual(t, first, second, "names are unique")
		require.True(t, namespaceExists(t, root, first))
		require.True(t, namespaceExists(t, leaf, first))
		require.False(t, namespaceExists(t, leaf, second))
		require.True(t, namespaceExists(t, leaf, kept))

		// Already there in the other cluster (made for a delegate): kept.
		made := fake.NewClientset()
		made.PrependReactor("create", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
			name := a.(k8stesting.CreateAction).GetObject().(*corev1.Namespace).Name
			return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "namespaces"}, name)
		})
		Namespace(t, root, "t", made)
	})
	for _, ns := range []string{first, second} {
		require.False(t, namespaceExists(t, root, ns), "%s deleted at the root", ns)
	}
	require.False(t, namespaceExists(t, leaf, first), "deleted in the other cluster too")
	require.True(t, namespaceExists(t, root, kept), "KeptNamespace's stays")
	require.True(t, namespaceExists(t, leaf, kept), "KeptNamespace's stays in the other cluster too")
}

// A name taken is drawn again; any other refusal fails the test.
func TestNamespaceNameTaken(t *testing.T) {
	c := fake.NewClientset()
	taken := 0
	c.PrependReactor("create", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		if taken < 2 {
			taken++
			return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "namespaces"}, "taken")
		}
		return false, nil, nil
	})
	ns, err := createUniqueNamespace(t.Context(), c, "t")
	require.NoError(t, err)
	require.Equal(t, 2, taken)
	require.True(t, namespaceExists(t, c, ns))

	refused := fake.NewClientset()
	refused.PrependReactor("create", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", nil)
	})
	_, err = createUniqueNamespace(t.Context(), refused, "t")
	require.True(t, apierrors.IsForbidden(err), "%v", err)
}
