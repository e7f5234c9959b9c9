package agent

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/revoked"
	"github.com/nestlet/nestlet/provider/join"
)

// The approver approves a join with an auto-approve token for the name it
// was made for, denies another name, and leaves alone the requests of
// manual tokens (nestctl approve's); it approves renewals, but a revoked
// node's.
func TestApprover(t *testing.T) {
	csr := func(name, node, user string) *certificatesv1.CertificateSigningRequest {
		key, err := join.NewKey()
		require.NoError(t, err)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: join.NodeUser(node), Organization: []string{"system:nodes"}}}, key)
		require.NoError(t, err)
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
				Username:   user,
			}}
	}
	token := func(id, child string, auto bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system",
			Annotations: map[string]string{api.AnnotationTokenChildName: child}},
			Data: map[string][]byte{"token-id": []byte(id)}}
		if auto {
			s.Annotations[api.AnnotationTokenAutoApprove] = "true"
		}
		return s
	}
	objs := []runtime.Object{
		token("aaaaaa", "east", true), token("bbbbbb", "east", false),
		csr("east", "east", "system:bootstrap:aaaaaa"),
		csr("impostor", "west", "system:bootstrap:aaaaaa"),
		csr("manual", "east", "system:bootstrap:bbbbbb"),
		csr("renewal", "east", "system:node:east"),
		token("cccccc", "gone", true),
		csr("gone-renewal", "gone", "system:node:gone"),
		csr("gone-join", "gone", "system:bootstrap:cccccc"),
		csr("someone-elses-renewal", "east", "system:node:west"),
	}
	client := fake.NewClientset(objs...)
	rev := revoked.New(nil, nil)
	rev.Set(map[string]string{"gone": "2026-11-25T12:00:00Z, nestctl revoke"})
	ap, err := newApprover(client, rev)
	require.NoError(t, err)
	for _, o := range objs {
		if c, ok := o.(*certificatesv1.CertificateSigningRequest); ok {
			require.NoError(t, ap.informer.GetIndexer().Add(c))
		}
	}
	for _, name := range []string{"east", "impostor", "manual", "renewal", "gone-renewal", "gone-join", "someone-elses-renewal"} {
		require.NoError(t, ap.sync(t.Context(), name))
	}
	decision := func(name string) string {
		c, err := client.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		if len(c.Status.Conditions) == 0 {
			return "pending"
		}
		return string(c.Status.Conditions[0].Type) + ": " + c.Status.Conditions[0].Message
	}
	require.Contains(t, decision("east"), "Approved: ")
	require.Contains(t, decision("impostor"), `Denied: bootstrap token aaaaaa was made for child "east"`)
	require.Equal(t, "pending", decision("manual"), "a token without --auto-approve waits for nestctl approve")
	require.Contains(t, decision("renewal"), "Approved: ", "a node renewing its own certificate")
	require.Contains(t, decision("gone-renewal"), `Denied: node "gone" was revoked`)
	require.Contains(t, decision("gone-join"), `Denied: node "gone" was revoked`)
	require.Contains(t, decision("someone-elses-renewal"), `Denied: filed by system:node:west, not by node "east" itself`)
}
