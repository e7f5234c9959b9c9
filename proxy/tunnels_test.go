package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNodeName(t *testing.T) {
	tests := []struct {
		name     string
		cn       string
		orgs     []string
		wantName string
		wantOK   bool
	}{
		{name: "node certificate", cn: "system:node:east", orgs: []string{"system:nodes"}, wantName: "east", wantOK: true},
		{name: "node certificate with more groups", cn: "system:node:east", orgs: []string{"tenants", "system:nodes"}, wantName: "east", wantOK: true},
		{name: "node name with dots and colons kept whole", cn: "system:node:east.example:1", orgs: []string{"system:nodes"}, wantName: "east.example:1", wantOK: true},
		{name: "not in system:nodes", cn: "system:node:east", orgs: []string{"system:masters"}},
		{name: "no group", cn: "system:node:east"},
		{name: "a group that only looks like it", cn: "system:node:east", orgs: []string{"system:nodes:extra"}},
		{name: "wrong prefix", cn: "system:nodes:east", orgs: []string{"system:nodes"}},
		{name: "a user, not a node", cn: "east", orgs: []string{"system:nodes"}},
		{name: "prefix not at the start", cn: "x-system:node:east", orgs: []string{"system:nodes"}},
		{name: "empty node name", cn: "system:node:", orgs: []string{"system:nodes"}},
		{name: "API server's kubelet client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert := &x509.Certificate{Subject: pkix.Name{CommonName: tt.cn, Organization: tt.orgs}}
			name, ok := nodeName(cert)
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Equal(t, tt.wantName, name)
			}
		})
	}
}

func TestAuthorizeTunnel(t *testing.T) {
	node := &x509.Certificate{Subject: pkix.Name{CommonName: "system:node:east", Organization: []string{"system:nodes"}}}
	other := &x509.Certificate{Subject: pkix.Name{CommonName: "system:node:west", Organization: []string{"system:nodes"}}}
	user := &x509.Certificate{Subject: pkix.Name{CommonName: "alice", Organization: []string{"devs"}}}
	ca := &x509.Certificate{Subject: pkix.Name{CommonName: "cluster-ca"}, IsCA: true}
	tests := []struct {
		name    string
		tls     *tls.ConnectionState
		wantKey string
		wantOK  bool
	}{
		{
			name:    "verified node certificate",
			tls:     &tls.ConnectionState{PeerCertificates: []*x509.Certificate{node}, VerifiedChains: [][]*x509.Certificate{{node, ca}}},
			wantKey: "east", wantOK: true,
		},
		{
			name: "the first verified chain's leaf decides",
			tls: &tls.ConnectionState{
				PeerCertificates: []*x509.Certificate{other},
				VerifiedChains:   [][]*x509.Certificate{{other, ca}, {other}},
			},
			wantKey: "west", wantOK: true,
		},
		{name: "no TLS", tls: nil},
		{name: "TLS without a client certificate", tls: &tls.ConnectionState{}},
		{
			name: "a client certificate that did not verify",
			tls:  &tls.ConnectionState{PeerCertificates: []*x509.Certificate{node}},
		},
		{
			name: "verified, but not a node",
			tls:  &tls.ConnectionState{PeerCertificates: []*x509.Certificate{user}, VerifiedChains: [][]*x509.Certificate{{user, ca}}},
		},
	}
	p := &Proxy{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "https://proxy.example/connect", nil)
			r.TLS = tt.tls
			key, ok, err := p.authorizeTunnel(r)
			require.NoError(t, err)
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				assert.Equal(t, tt.wantKey, key)
			}
		})
	}
}

// TestTunnelPortClientCertificates checks the TLS set-up of the tunnel
// port with authorizeTunnel: only a node certificate signed by ClientCA
// gets a tunnel, under its own node name.
func TestTunnelPortClientCertificates(t *testing.T) {
	clientCA := newTestCA(t, "parent-client-ca")
	otherCA := newTestCA(t, "someone-else")
	serving := newTestCA(t, "proxy-ca").issue(t, "proxy", nil, x509.ExtKeyUsageServerAuth, "127.0.0.1")

	p := &Proxy{cfg: Config{ClientCA: clientCA.pem, ServingCert: serving}}
	tlsCfg, err := p.tlsConfig()
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok, err := p.authorizeTunnel(r)
		_, _ = fmt.Fprintf(w, "%s %t %v", key, ok, err)
	}))
	srv.TLS = tlsCfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes
	srv.StartTLS()
	defer srv.Close()

	nodeCert := func(ca *testCA, usage x509.ExtKeyUsage) *tls.Certificate {
		c := ca.issue(t, "system:node:east", []string{"system:nodes"}, usage)
		return &c
	}
	tests := []struct {
		name string
		cert *tls.Certificate
		// wantKey is the tunnel's key; "" when the tunnel is refused (by
		// the handshake or by authorizeTunnel).
		wantKey string
	}{
		{name: "node certificate from the client CA", cert: nodeCert(clientCA, x509.ExtKeyUsageClientAuth), wantKey: "east"},
		{name: "no client certificate"},
		{name: "a user certificate from the client CA", cert: ptrTo(clientCA.issue(t, "alice", nil, x509.ExtKeyUsageClientAuth))},
		{name: "node certificate from another CA", cert: nodeCert(otherCA, x509.ExtKeyUsageClientAuth)},
		{name: "node certificate for serving only", cert: nodeCert(clientCA, x509.ExtKeyUsageServerAuth)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
			if tt.cert != nil {
				// Sent whatever CAs the server asks for.
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return tt.cert, nil }
			}
			tr := &http.Transport{TLSClientConfig: cfg}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/connect")
			if err != nil {
				assert.Empty(t, tt.wantKey, "handshake failed: %v", err)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			want := " false <nil>"
			if tt.wantKey != "" {
				want = tt.wantKey + " true <nil>"
			}
			assert.Equal(t, want, string(body))
		})
	}
}

// testCA signs test certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf for cn in the groups orgs with usage; ips are its IP
// SANs.
func (ca *testCA) issue(t *testing.T, cn string, orgs []string, usage x509.ExtKeyUsage, ips ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func ptrTo[T any](v T) *T { return &v }
