package nestctl

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/provider/join"
)

// Approve approves every pending kubelet-client CSR for cluster's node
// identity and returns their names; it fails when there is none.
func Approve(ctx context.Context, client kubernetes.Interface, cluster string) ([]string, error) {
	list, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var approved []string
	for i := range list.Items {
		csr := &list.Items[i]
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || decided(csr) || subject(csr) != join.NodeUser(cluster) {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
			Reason: "NestctlApprove", Message: "approved with nestctl approve " + cluster,
		})
		if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{FieldManager: "nestctl"}); err != nil {
			return approved, fmt.Errorf("approving %s: %w", csr.Name, err)
		}
		approved = append(approved, csr.Name)
	}
	if len(approved) == 0 {
		return nil, fmt.Errorf("no pending certificate request for cluster %q (is its Target applied and its agent running?)", cluster)
	}
	return approved, nil
}

func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return false
}

func subject(csr *certificatesv1.CertificateSigningRequest) string {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return ""
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return ""
	}
	return req.Subject.CommonName
}
