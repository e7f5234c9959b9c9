package forward

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// The keeper deletes a namespace it made once it has held no pod, Service
// or claim for the idle time (counted from when this process first saw it,
// or last needed it), and never one it did not make; a namespace being
// deleted is a passing refusal for whoever needs it.
func TestNamespaceKeeper(t *testing.T) {
	made := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{LabelNamespaceManagedBy: NamespaceManagedBy}}}
	}
	own := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "own"}}
	client := fake.NewClientset(made("idle"), made("pods"), made("svc"), made("claims"), made("needed"), own,
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "pods"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "svc"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "claims"}})
	factory := informers.NewSharedInformerFactory(client, 0)
	nsInf, podInf := factory.Core().V1().Namespaces(), factory.Core().V1().Pods()
	nsInf.Informer()
	podInf.Informer()
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	require.True(t, cache.WaitForCacheSync(t.Context().Done(), nsInf.Informer().HasSynced, podInf.Informer().HasSynced))

	clk := clocktesting.NewFakeClock(time.Now())
	const idle = time.Minute
	k := NewNamespaceKeeper(NamespaceKeeperConfig{Client: client, Namespaces: nsInf.Lister(), Pods: podInf.Lister(), Idle: idle, Clock: clk})
	exists := func(name string) bool {
		_, err := client.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false
		}
		require.NoError(t, err)
		return true
	}

	k.collect(t.Context()) // first seen: busy now
	clk.Step(idle / 2)
	created, err := k.ensure(t.Context(), metav1.ObjectMeta{Name: "needed"})
	require.NoError(t, err)
	require.False(t, created, "it exists")
	clk.Step(idle / 2)
	k.collect(t.Context())
	require.False(t, exists("idle"), "idle for the idle time since first seen")
	for _, name := range []string{"pods", "svc", "claims", "needed", "own"} {
		require.True(t, exists(name), name)
	}
	clk.Step(idle / 2)
	k.collect(t.Context())
	require.False(t, exists("needed"), "idle for the idle time since last needed")
	for _, name := range []string{"pods", "svc", "claims", "own"} {
		require.True(t, exists(name), name)
	}

	created, err = k.ensure(t.Context(), metav1.ObjectMeta{Name: "new", Labels: map[string]string{LabelNamespaceManagedBy: NamespaceManagedBy}})
	require.NoError(t, err)
	require.True(t, created)
	require.True(t, exists("new"))

	terminating := made("pods")
	terminating.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
	require.NoError(t, nsInf.Informer().GetStore().Update(terminating))
	_, err = k.ensure(t.Context(), metav1.ObjectMeta{Name: "pods"})
	require.ErrorIs(t, err, errNamespaceTerminating)
	require.True(t, transient(err), "a namespace being deleted is waited for")
}

// A pod refused for a namespace being deleted is retried, not failed.
func TestNamespaceTerminatingIsTransient(t *testing.T) {
	err := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `pods "p" is forbidden: unable to create new content in namespace t because it is being terminated`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"}}}}}
	require.True(t, transient(err))
}
