package join

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/api"
)

// testCA is a CA that issues node certificates, as the parent's signer does.
type testCA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	pem    []byte
	serial int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "parent-ca"},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// issue returns a client certificate (PEM) for cn and pub.
func (ca *testCA) issue(t *testing.T, cn string, pub crypto.PublicKey, notBefore, notAfter time.Time) []byte {
	t.Helper()
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// newTestIdentity returns the identity of cluster in parent, valid from
// notBefore to notAfter.
func newTestIdentity(t *testing.T, ca *testCA, parent *Parent, cluster string, notBefore, notAfter time.Time) *Identity {
	t.Helper()
	key, err := NewKey()
	require.NoError(t, err)
	id, err := NewIdentity(parent, cluster, ca.issue(t, NodeUser(cluster), key.Public(), notBefore, notAfter), key)
	require.NoError(t, err)
	return id
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestNewIdentity(t *testing.T) {
	ca := newTestCA(t)
	parent := &Parent{URL: "https://parent:6443", CAData: ca.pem, ClusterName: "root"}
	key, err := NewKey()
	require.NoError(t, err)
	otherKey, err := NewKey()
	require.NoError(t, err)
	tests := []struct {
		name    string
		cert    []byte
		wantErr string
	}{
		{name: "matching", cert: ca.issue(t, "system:node:child", key.Public(), t0, t0.Add(time.Hour))},
		{name: "another cluster's certificate", cert: ca.issue(t, "system:node:other", key.Public(), t0, t0.Add(time.Hour)), wantErr: `not "system:node:child"`},
		{name: "another key's certificate", cert: ca.issue(t, "system:node:child", otherKey.Public(), t0, t0.Add(time.Hour)), wantErr: "do not match"},
		{name: "no certificate", cert: []byte("garbage"), wantErr: "do not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := NewIdentity(parent, "child", tt.cert, key)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			want := &Identity{ParentURL: parent.URL, ClusterName: "child", ParentClusterName: "root", CAData: ca.pem, CertData: tt.cert, KeyData: id.KeyData}
			if d := cmp.Diff(want, id, cmpopts.IgnoreUnexported(Identity{})); d != "" {
				t.Errorf("NewIdentity() mismatch (-want +got):\n%s", d)
			}
			assert.Equal(t, t0.Add(time.Hour), id.NotAfter())
			cfg := id.RESTConfig()
			assert.Equal(t, parent.URL, cfg.Host)
			assert.Equal(t, ca.pem, cfg.CAData)
			assert.Equal(t, tt.cert, cfg.CertData)
			assert.Equal(t, id.KeyData, cfg.KeyData)
		})
	}
}

func TestIdentityRenewAt(t *testing.T) {
	ca := newTestCA(t)
	parent := &Parent{URL: "https://parent:6443", CAData: ca.pem}
	tests := []struct {
		name string
		life time.Duration
		want time.Duration // after NotBefore
	}{
		{name: "one hour", life: time.Hour, want: 48 * time.Minute},
		{name: "one year", life: 365 * 24 * time.Hour, want: 292 * 24 * time.Hour},
		// kube-controller-manager --cluster-signing-duration=876000h, as
		// some set it: the lifetime times 4 overflows a time.Duration.
		{name: "one hundred years", life: 876000 * time.Hour, want: 700800 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := newTestIdentity(t, ca, parent, "child", t0, t0.Add(tt.life))
			assert.Equal(t, t0.Add(tt.want), id.RenewAt())
			assert.Equal(t, t0.Add(tt.life), id.NotAfter())
		})
	}
}

func TestStore(t *testing.T) {
	const (
		ns        = "nestlet-system"
		parentURL = "https://parent:6443"
	)
	ca := newTestCA(t)
	parent := &Parent{URL: parentURL, CAData: ca.pem, ClusterName: "root"}
	// 100 hours: renewal is due at t0+80h.
	id := newTestIdentity(t, ca, parent, "child", t0, t0.Add(100*time.Hour))

	tests := []struct {
		name        string
		secret      func(*corev1.Secret) // changes the saved Secret; nil to keep it
		target      string
		parentURL   string
		clusterName string
		now         time.Time
		wantNil     bool
	}{
		{name: "round trip", target: "up", parentURL: parentURL, clusterName: "child", now: t0.Add(time.Hour)},
		{name: "past RenewAt, before NotAfter", target: "up", parentURL: parentURL, clusterName: "child", now: t0.Add(90 * time.Hour)},
		{name: "just before NotAfter", target: "up", parentURL: parentURL, clusterName: "child", now: t0.Add(100*time.Hour - time.Second)},
		{name: "at NotAfter", target: "up", parentURL: parentURL, clusterName: "child", now: t0.Add(100 * time.Hour), wantNil: true},
		{name: "expired", target: "up", parentURL: parentURL, clusterName: "child", now: t0.Add(200 * time.Hour), wantNil: true},
		{name: "another parent URL", target: "up", parentURL: "https://other:6443", clusterName: "child", now: t0.Add(time.Hour), wantNil: true},
		{name: "another cluster name", target: "up", parentURL: parentURL, clusterName: "other", now: t0.Add(time.Hour), wantNil: true},
		{name: "another target", target: "other", parentURL: parentURL, clusterName: "child", now: t0.Add(time.Hour), wantNil: true},
		{
			name:   "broken certificate",
			secret: func(s *corev1.Secret) { s.Data[corev1.TLSCertKey] = []byte("garbage") },
			target: "up", parentURL: parentURL, clusterName: "child", now: t0.Add(time.Hour), wantNil: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			store := &Store{Client: client, Namespace: ns}
			require.NoError(t, store.Save(t.Context(), "up", id))
			if tt.secret != nil {
				sec, err := client.CoreV1().Secrets(ns).Get(t.Context(), api.IdentitySecretName("up"), metav1.GetOptions{})
				require.NoError(t, err)
				tt.secret(sec)
				_, err = client.CoreV1().Secrets(ns).Update(t.Context(), sec, metav1.UpdateOptions{})
				require.NoError(t, err)
			}

			got, err := store.Load(t.Context(), tt.target, tt.parentURL, tt.clusterName, tt.now)
			require.NoError(t, err)
			if tt.wantNil {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			if d := cmp.Diff(id, got, cmpopts.IgnoreUnexported(Identity{})); d != "" {
				t.Errorf("Load() mismatch (-want +got):\n%s", d)
			}
			assert.Equal(t, id.NotAfter(), got.NotAfter())
			assert.Equal(t, t0.Add(80*time.Hour), got.RenewAt())
		})
	}
}

func TestStoreSecret(t *testing.T) {
	ca := newTestCA(t)
	parent := &Parent{URL: "https://parent:6443", CAData: ca.pem, ClusterName: "root"}
	first := newTestIdentity(t, ca, parent, "child", t0, t0.Add(time.Hour))
	second := newTestIdentity(t, ca, parent, "child", t0.Add(time.Hour), t0.Add(2*time.Hour))
	client := fake.NewClientset()
	store := &Store{Client: client, Namespace: "nestlet-system"}

	require.NoError(t, store.Save(t.Context(), "up", first))
	require.NoError(t, store.Save(t.Context(), "up", second), "saving over an identity")

	sec, err := client.CoreV1().Secrets("nestlet-system").Get(t.Context(), "nestlet-identity-up", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.SecretTypeTLS, sec.Type)
	wantData := map[string][]byte{"tls.crt": second.CertData, "tls.key": second.KeyData, "ca.crt": ca.pem}
	if d := cmp.Diff(wantData, sec.Data); d != "" {
		t.Errorf("secret data mismatch (-want +got):\n%s", d)
	}
	got, err := store.Load(t.Context(), "up", parent.URL, "child", t0.Add(90*time.Minute))
	require.NoError(t, err)
	require.NotNil(t, got, "the second identity is not loaded")
	assert.Equal(t, second.CertData, got.CertData)

	require.NoError(t, store.Delete(t.Context(), "up"))
	got, err = store.Load(t.Context(), "up", parent.URL, "child", t0.Add(90*time.Minute))
	require.NoError(t, err)
	assert.Nil(t, got, "identity still there after Delete")
	require.NoError(t, store.Delete(t.Context(), "up"), "deleting twice")
}
