package nestctl

import (
	"context"
	"errors"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/join"
)

// Approve approves every pending kubelet-client CSR for cluster's node
// identity that its requester may have, and returns their names: one filed
// with a bootstrap token made for that child (or for no child, while no
// live node has the name), or by the node itself (a renewal). Any other
// request for the name is denied and named in the error: whoever filed it
// holds a token made for another child, or is another node. It fails when
// nothing was approved.
func Approve(ctx context.Context, client kubernetes.Interface, cluster string) ([]string, error) {
	list, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var approved []string
	var refused []error
	for i := range list.Items {
		csr := &list.Items[i]
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || join.Decided(csr) {
			continue
		}
		if node, err := join.CheckNodeCSR(csr.Spec.Request, csr.Spec.Usages); err != nil || node != cluster {
			continue
		}
		verdict, err := checkRequester(ctx, client, csr, cluster)
		if err != nil {
			return approved, err
		}
		cond := certificatesv1.CertificateSigningRequestCondition{Status: corev1.ConditionTrue, Message: verdict.Message}
		if verdict.Allowed {
			cond.Type, cond.Reason = certificatesv1.CertificateApproved, "NestctlApprove"
		} else {
			cond.Type, cond.Reason = certificatesv1.CertificateDenied, "NestctlRequesterMismatch"
			refused = append(refused, fmt.Errorf("certificatesigningrequest/%s denied: %s", csr.Name, verdict.Message))
		}
		csr.Status.Conditions = append(csr.Status.Conditions, cond)
		if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{FieldManager: "nestctl"}); err != nil {
			return approved, fmt.Errorf("deciding %s: %w", csr.Name, err)
		}
		if verdict.Allowed {
			approved = append(approved, csr.Name)
		}
	}
	if len(approved) == 0 {
		if len(refused) > 0 {
			return nil, errors.Join(refused...)
		}
		return nil, fmt.Errorf("no pending certificate request for cluster %q (is its Target applied and its agent running?)", cluster)
	}
	return approved, errors.Join(refused...)
}

// checkRequester decides whether whoever filed csr may be node cluster.
func checkRequester(ctx context.Context, client kubernetes.Interface, csr *certificatesv1.CertificateSigningRequest, cluster string) (join.Verdict, error) {
	user := csr.Spec.Username
	if token, ok := join.GrantOf(csr); ok {
		secret, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, bootstraputil.BootstrapTokenSecretName(token.ID), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return join.Verdict{Message: fmt.Sprintf("filed with bootstrap token %s, which no longer exists: the child joins again with a new one", token.ID)}, nil
		}
		if err != nil {
			return join.Verdict{}, err
		}
		if token.ChildName == "" {
			// A token made before the name travelled in its groups.
			token.ChildName = secret.Annotations[api.AnnotationTokenChildName]
		}
		return join.CheckNodeRequest(ctx, join.LiveNodes(client), csr, token, join.RevocationsIn(client))
	}
	if user == join.NodeUser(cluster) {
		return join.CheckRenewal(ctx, csr, join.RevocationsIn(client))
	}
	return join.Verdict{Message: fmt.Sprintf("filed by %s, neither a bootstrap token nor node %s itself", user, cluster)}, nil
}
