package parent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// deleteRevoked deletes the virtual node of a child this cluster cut off
// (`nestctl revoke`, pkg/revoked): it is gone as a lost node is (its pods
// are collected and replaced elsewhere), and comes back only to be deleted
// again.
func deleteRevoked(ctx context.Context, client kubernetes.Interface, n *corev1.Node) error {
	return deleteChildNode(ctx, client, n, "Deleted the virtual node of a revoked child")
}

// deleteChildNode deletes n, this version of it only, and logs why.
func deleteChildNode(ctx context.Context, client kubernetes.Interface, n *corev1.Node, why string) error {
	err := client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &n.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		klog.FromContext(ctx).Info(why, "node", n.Name)
	}
	return err
}
