package nestctl

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/join"
)

// Revoke cuts child off this cluster (its parent): it records the child in
// kube-system/nestlet-revoked, so that its certificate requests, renewals
// included, are denied from now on, its virtual node is deleted whenever
// it appears and nestlet-proxy closes and refuses its tunnels; it denies
// the child's pending requests and deletes its virtual node now. Its pods
// here are then a lost node's (the pod garbage collector removes them,
// their controllers replace them). The child's current certificate stays
// valid for the API server until it expires. It returns what it did.
func Revoke(ctx context.Context, client kubernetes.Interface, child, reason string, now time.Time) ([]string, error) {
	entry := now.UTC().Format(time.RFC3339)
	if reason != "" {
		entry += ", " + reason
	}
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	patch, err := json.Marshal(map[string]any{"data": map[string]string{child: entry}})
	if err != nil {
		return nil, err
	}
	_, err = cms.Patch(ctx, api.RevokedConfigMap, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "nestctl"})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.RevokedConfigMap, Namespace: metav1.NamespaceSystem},
			Data: map[string]string{child: entry}}, metav1.CreateOptions{FieldManager: "nestctl"})
	}
	if err != nil {
		return nil, fmt.Errorf("recording the revocation in %s/%s: %w", metav1.NamespaceSystem, api.RevokedConfigMap, err)
	}
	done := []string{fmt.Sprintf("configmap/%s: %s revoked (%s)", api.RevokedConfigMap, child, entry)}

	list, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return done, err
	}
	for i := range list.Items {
		csr := &list.Items[i]
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || join.Decided(csr) {
			continue
		}
		if node, err := join.CheckNodeCSR(csr.Spec.Request, csr.Spec.Usages); err != nil || node != child {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "NestctlRevoke",
			Message: "node " + child + " was revoked with nestctl revoke",
		})
		if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{FieldManager: "nestctl"}); err != nil {
			return done, fmt.Errorf("denying %s: %w", csr.Name, err)
		}
		done = append(done, "certificatesigningrequest/"+csr.Name+" denied")
	}

	err = client.CoreV1().Nodes().Delete(ctx, child, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return done, fmt.Errorf("deleting node %s: %w", child, err)
	default:
		done = append(done, "node/"+child+" deleted")
	}
	return done, nil
}
