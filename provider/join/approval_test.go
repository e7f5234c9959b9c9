package join

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// nodeCSRForTest is a certificate request of subject, as a child (or an
// impostor) files it.
func nodeCSRForTest(t *testing.T, subject pkix.Name, dnsNames ...string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := NewKey()
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject, DNSNames: dnsNames}, key)
	require.NoError(t, err)
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			Username:   "system:bootstrap:abcdef",
			// What the agent asks for (RequestNodeCertificate).
			ExpirationSeconds: ptr.To(int32(NodeCertificateLifetime / time.Second)),
		},
	}
}

// lifetime returns csr asking for seconds (nil: naming no lifetime).
func lifetime(csr *certificatesv1.CertificateSigningRequest, seconds *int32) *certificatesv1.CertificateSigningRequest {
	csr.Spec.ExpirationSeconds = seconds
	return csr
}

func TestCheckNodeRequest(t *testing.T) {
	node := func(name string) pkix.Name {
		return pkix.Name{CommonName: NodeUser(name), Organization: []string{"system:nodes"}}
	}
	token := func(child string) TokenGrant { return TokenGrant{ID: "abcdef", ChildName: child} }
	live := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	gone := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "west"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	client := fake.NewClientset(live, gone, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.RevokedConfigMap, Namespace: "kube-system"},
		Data: map[string]string{"south": "2026-11-25T12:00:00Z, e2e"}})
	for _, c := range []struct {
		name    string
		csr     *certificatesv1.CertificateSigningRequest
		token   TokenGrant
		allowed bool
		says    string
	}{
		{"the name the token was made for", nodeCSRForTest(t, node("east")), token("east"), true, "made for it"},
		{"another child's name", nodeCSRForTest(t, node("west")), token("east"), false, `made for child "east"; this request asks for node "west"`},
		{"a token for no child, a live node's name", nodeCSRForTest(t, node("east")), token(""), false, "exists and is Ready"},
		{"a token for no child, a lost node's name", nodeCSRForTest(t, node("west")), token(""), false, `node "west" exists (not Ready)`},
		{"a token for no child, a new name", nodeCSRForTest(t, node("north")), token(""), true, "no node has that name"},
		{"a token for no child, the API server's name", nodeCSRForTest(t, node("kubernetes.default.svc")), token(""), false, "is the API server's name"},
		{"a token for no child, a Service's name", nodeCSRForTest(t, node("db.prod.svc.cluster.local")), token(""), false, "is a Service's DNS name"},
		{"a revoked name, with its own token", nodeCSRForTest(t, node("south")), token("south"), false, `node "south" was revoked in this cluster (2026-11-25T12:00:00Z, e2e)`},
		{"not a node's subject", nodeCSRForTest(t, pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}}), token(""), false, "not a node client certificate request"},
		{"extra names", nodeCSRForTest(t, node("east"), "kubernetes.default"), token("east"), false, "not a node client certificate request"},
		{"a year", lifetime(nodeCSRForTest(t, node("east")), ptr.To(int32(365*24*3600))), token("east"), false, "a child's certificate may live 24h0m0s at most"},
		{"no lifetime: the signer's", lifetime(nodeCSRForTest(t, node("east")), nil), token("east"), false, "names no lifetime"},
		{"an hour", lifetime(nodeCSRForTest(t, node("east")), ptr.To(int32(3600))), token("east"), true, "made for it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := CheckNodeRequest(t.Context(), LiveNodes(client), c.csr, c.token, RevocationsIn(client))
			require.NoError(t, err)
			require.Equal(t, c.allowed, v.Allowed, v.Message)
			require.Contains(t, v.Message, c.says)
		})
	}
}

// The grant is read from the groups the API server put in the request:
// the token's extra groups, never the requester's words.
func TestGrantOf(t *testing.T) {
	csr := nodeCSRForTest(t, pkix.Name{CommonName: NodeUser("east"), Organization: []string{"system:nodes"}})
	g, ok := GrantOf(csr)
	require.True(t, ok)
	require.Equal(t, TokenGrant{ID: "abcdef"}, g, "a token with no extra groups: any name, nestctl approve")
	csr.Spec.Groups = []string{"system:bootstrappers", api.GroupTokenChildPrefix + "east", api.GroupTokenAutoApprove}
	g, _ = GrantOf(csr)
	require.Equal(t, TokenGrant{ID: "abcdef", ChildName: "east", AutoApprove: true}, g)
	csr.Spec.Username = NodeUser("east")
	_, ok = GrantOf(csr)
	require.False(t, ok, "a renewal, filed by the node itself")
}
