package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
)

// namespaceDeleteTimeout bounds the deletion of a test's namespaces when
// it ends: a cluster the test left broken does not hold the next one up.
const namespaceDeleteTimeout = 15 * time.Second

// Namespace creates a namespace of the test's own in the cluster of
// client, named prefix, a dash and a random suffix, and the namespace of
// the same name in each of also's clusters (kept if there already, as
// when Nestlet made it for a delegate). It returns the name.
//
// When the test ends, after the cleanups registered later (a watch of the
// namespace's pods stops first), it deletes the namespaces, without
// waiting for them to go: their pods, and their delegates below, are
// deleted while the next test runs. A namespace already gone or going is
// left be; a deletion that fails is logged, not failed on.
func Namespace(t testing.TB, client kubernetes.Interface, prefix string, also ...kubernetes.Interface) string {
	t.Helper()
	return makeNamespace(t, true, client, prefix, also)
}

// KeptNamespace is Namespace, the namespaces left as they are when the
// test ends (they end with the clusters): for the tests of a package
// whose later tests count what runs in the clusters across namespaces
// (capacity, pods per node), which the deletions going on in the
// background would disturb.
func KeptNamespace(t testing.TB, client kubernetes.Interface, prefix string, also ...kubernetes.Interface) string {
	t.Helper()
	return makeNamespace(t, false, client, prefix, also)
}

func makeNamespace(t testing.TB, deleteAtEnd bool, client kubernetes.Interface, prefix string, also []kubernetes.Interface) string {
	t.Helper()
	ns, err := createUniqueNamespace(t.Context(), client, prefix)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if deleteAtEnd {
		clients := append([]kubernetes.Interface{client}, also...)
		t.Cleanup(func() { deleteNamespace(t, ns, clients) })
	}
	for _, c := range also {
		_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
	}
	return ns
}

// createUniqueNamespace creates a namespace named prefix, a dash and a
// random suffix, another suffix if the name is taken, and returns its
// name.
func createUniqueNamespace(ctx context.Context, client kubernetes.Interface, prefix string) (string, error) {
	const attempts = 5
	var err error
	for range attempts {
		ns := prefix + "-" + utilrand.String(5)
		_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err == nil {
			return ns, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	return "", fmt.Errorf("creating a namespace %s-*: %d names taken: %w", prefix, attempts, err)
}

// deleteNamespace deletes namespace ns in each of clients, as a cleanup
// (t.Context() is done by then): not waiting for it to go, leaving be one
// already gone or going (Conflict), logging any other failure.
func deleteNamespace(t testing.TB, ns string, clients []kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), namespaceDeleteTimeout)
	defer cancel()
	for _, c := range clients {
		err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			t.Logf("deleting namespace %s: %v", ns, err)
		}
	}
}
