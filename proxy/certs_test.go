package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certutil "k8s.io/client-go/util/cert"
)

func TestServingCertificateSelfSigned(t *testing.T) {
	tests := []struct {
		name      string
		hosts     []string
		wantNames []string // names the certificate must verify for
	}{
		{name: "an IP", hosts: []string{"10.0.0.1"}, wantNames: []string{"10.0.0.1"}},
		{name: "a DNS name", hosts: []string{"proxy.example.com"}, wantNames: []string{"proxy.example.com"}},
		{name: "a DNS name and a bind IP", hosts: []string{"proxy.example.com", "10.0.0.2"}, wantNames: []string{"proxy.example.com", "10.0.0.2"}},
		{name: "an IP and more names", hosts: []string{"192.168.1.5", "proxy.internal", "fd00::5"}, wantNames: []string{"192.168.1.5", "proxy.internal", "fd00::5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, caPEM, err := ServingCertificate("", "", tt.hosts)
			require.NoError(t, err)
			require.NotEmpty(t, cert.Certificate)
			require.NotNil(t, cert.PrivateKey)
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			require.NoError(t, err)

			roots := x509.NewCertPool()
			require.True(t, roots.AppendCertsFromPEM(caPEM), "the returned PEM holds certificates")
			for _, name := range tt.wantNames {
				_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
				assert.NoError(t, err, "verifying for %s", name)
			}
			_, err = leaf.Verify(x509.VerifyOptions{DNSName: "elsewhere.example.com", Roots: roots})
			assert.Error(t, err, "the certificate is for its hosts only")
			_, err = leaf.Verify(x509.VerifyOptions{DNSName: "10.9.9.9", Roots: roots})
			assert.Error(t, err, "the certificate is for its hosts only")

			// The key pair matches, and the CA in the PEM signs the leaf:
			// a pool of the PEM's CA alone verifies it too.
			_, err = tls.X509KeyPair(pemOf(cert.Certificate...), mustKeyPEM(t, cert))
			require.NoError(t, err)
			certs, err := certutil.ParseCertsPEM(caPEM)
			require.NoError(t, err)
			caOnly := x509.NewCertPool()
			for _, c := range certs {
				if c.IsCA {
					caOnly.AddCert(c)
				}
			}
			_, err = leaf.Verify(x509.VerifyOptions{DNSName: tt.wantNames[0], Roots: caOnly})
			assert.NoError(t, err)
		})
	}
}

func TestServingCertificateFromFiles(t *testing.T) {
	generated, _, err := ServingCertificate("", "", []string{"proxy.example.com"})
	require.NoError(t, err)
	certPEM := pemOf(generated.Certificate...)
	keyPEM := mustKeyPEM(t, generated)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))

	tests := []struct {
		name              string
		certFile, keyFile string
		wantErr           bool
	}{
		{name: "both files", certFile: certFile, keyFile: keyFile},
		{name: "no key file", certFile: certFile, wantErr: true},
		{name: "no certificate file", keyFile: keyFile, wantErr: true},
		{name: "missing files", certFile: filepath.Join(dir, "nope.crt"), keyFile: filepath.Join(dir, "nope.key"), wantErr: true},
		{name: "key and certificate swapped", certFile: keyFile, keyFile: certFile, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, bundle, err := ServingCertificate(tt.certFile, tt.keyFile, []string{"ignored.example.com"})
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, generated.Certificate, cert.Certificate)
			assert.Equal(t, certPEM, bundle, "the bundle is the certificate file")
		})
	}
}

func pemOf(ders ...[]byte) []byte {
	var out []byte
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

func mustKeyPEM(t *testing.T, cert tls.Certificate) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
