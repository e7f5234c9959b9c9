package join

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/apis/certificates"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// NodeUser returns the user name of the node identity of a cluster.
func NodeUser(clusterName string) string { return "system:node:" + clusterName }

// CSRName returns the name of the CSR for key: stable for one key, so a
// retry after a restart finds the CSR it made.
func CSRName(clusterName string, key crypto.Signer) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return fmt.Sprintf("nestlet-%s-%s", clusterName, hex.EncodeToString(sum[:5])), nil
}

// NodeCertificateLifetime is the lifetime a child asks for its node
// certificate in the parent (the parent's signer may give less): a stolen
// certificate is of use for that long at most, since the API server has
// no revocation (`nestctl revoke` stops renewals and tunnels at once);
// renewal, at 80% of it, makes a short one cheap.
const NodeCertificateLifetime = 24 * time.Hour

// RequestNodeCertificate asks the parent for a client certificate of
// system:node:<clusterName> (signer kubernetes.io/kube-apiserver-client-kubelet)
// and watches the CSR until it is issued, denied or failed. awaiting is
// called once the CSR exists and is not yet approved. It returns the
// certificate (PEM).
func RequestNodeCertificate(ctx context.Context, client kubernetes.Interface, clusterName string, key crypto.Signer, awaiting func(csrName string)) ([]byte, error) {
	logger := klog.FromContext(ctx)
	name, err := CSRName(clusterName, key)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: NodeUser(clusterName), Organization: []string{NodesGroup}},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("creating certificate request: %w", err)
	}
	csrs := client.CertificatesV1().CertificateSigningRequests()
	_, err = csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			ExpirationSeconds: ptr.To(int32(NodeCertificateLifetime / time.Second)),
		},
	}, metav1.CreateOptions{FieldManager: "nestlet"})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "can only create a node CSR") {
			// A node asking for another name: the API server's own check.
			return nil, Errorf(v1alpha1.ReasonCSRDenied, err, "the parent refuses a request for node %q from this identity", clusterName)
		}
		if apierrors.IsForbidden(err) {
			return nil, Errorf(v1alpha1.ReasonTokenRejected, err,
				"the token may not create certificate signing requests in the parent: run 'nestctl token create' on the parent, which grants bootstrappers that")
		}
		return nil, Classify(err, "the parent")
	}
	logger.V(2).Info("Created certificate signing request", "csr", name)

	lw := kubeclient.SingleObject(name, csrs.List, csrs.Watch)
	notified := false
	var issued []byte
	_, err = watchtools.UntilWithSync(ctx, lw, &certificatesv1.CertificateSigningRequest{}, nil, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Deleted {
			return false, Errorf(v1alpha1.ReasonCSRDenied, nil, "certificate signing request %s was deleted in the parent before it was issued", name)
		}
		csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return false, nil
		}
		approved := false
		for _, c := range csr.Status.Conditions {
			switch {
			case c.Type == certificatesv1.CertificateDenied && c.Status == corev1.ConditionTrue:
				return false, Errorf(v1alpha1.ReasonCSRDenied, nil,
					"the parent denied certificate signing request %s (%s: %s): ask the parent's operator to approve this cluster, then recreate the Target", name, c.Reason, c.Message)
			case c.Type == certificatesv1.CertificateFailed && c.Status == corev1.ConditionTrue:
				return false, Errorf(v1alpha1.ReasonCSRDenied, nil, "the parent failed to sign certificate signing request %s (%s: %s)", name, c.Reason, c.Message)
			case c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue:
				approved = true
			}
		}
		if len(csr.Status.Certificate) > 0 {
			issued = csr.Status.Certificate
			return true, nil
		}
		if !approved && !notified && awaiting != nil {
			notified = true
			awaiting(name)
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return issued, nil
}

// Decided reports whether csr was approved, denied or failed.
func Decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return true
		}
	}
	return false
}

// CheckNodeCSR returns the node name a certificate request (PEM) asks for,
// or why it is not exactly a node client certificate request (the
// kubelet-client signer's own rules: organization system:nodes, common
// name system:node:<name>, no other names, client usages).
func CheckNodeCSR(request []byte, usages []certificatesv1.KeyUsage) (string, error) {
	block, _ := pem.Decode(request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return "", fmt.Errorf("no PEM certificate request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return "", err
	}
	u := sets.NewString()
	for _, k := range usages {
		u.Insert(string(k))
	}
	if err := certificates.ValidateKubeletClientCSR(req, u); err != nil {
		return "", err
	}
	return strings.TrimPrefix(req.Subject.CommonName, NodeUser("")), nil
}
