package launcher

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPKIChains(t *testing.T) {
	dir := t.TempDir()
	ca, err := newCA(dir, "ca")
	require.NoError(t, err)
	serving, err := ca.issue(dir, "serving", pkix.Name{CommonName: "s"}, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	require.NoError(t, err)
	client, err := ca.issue(dir, "client", pkix.Name{CommonName: "c", Organization: []string{"g"}}, nil, nil)
	require.NoError(t, err)

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	_, err = serving.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err)
	_, err = client.cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	_, err = client.cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.Error(t, err, "a client certificate must not serve")
}
