package launcher

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certKey is a certificate with its key, both PEM-encoded on disk.
type certKey struct {
	cert     *x509.Certificate
	key      crypto.Signer
	CertPath string
	KeyPath  string
}

const pkiValidity = 10 * 365 * 24 * time.Hour

// newCA writes a self-signed CA to dir/name.{crt,key}.
func newCA(dir, name string) (*certKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: name}, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA %s: %w", name, err)
	}
	return writeCertKey(dir, name, ca.Raw, key)
}

// issue writes a certificate signed by ca to dir/name.{crt,key}: a client
// certificate when ips and dnsNames are empty, else a serving certificate.
func (ca *certKey) issue(dir, name string, subject pkix.Name, ips []net.IP, dnsNames []string) (*certKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(pkiValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
		DNSNames:     dnsNames,
	}
	if len(ips) > 0 || len(dnsNames) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("issuing %s: %w", name, err)
	}
	return writeCertKey(dir, name, der, key)
}

func writeCertKey(dir, name string, der []byte, key crypto.Signer) (*certKey, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ck := &certKey{cert: cert, key: key, CertPath: filepath.Join(dir, name+".crt"), KeyPath: filepath.Join(dir, name+".key")}
	if err := os.WriteFile(ck.CertPath, encodeCertPEM(der), 0o644); err != nil {
		return nil, err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(ck.KeyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	return ck, nil
}

// writeKeyPair writes a service-account signing key pair to dir/name.{key,pub}.
func writeKeyPair(dir, name string) (keyPath, pubPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", err
	}
	keyPath, pubPath = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubPath, encodePEM("PUBLIC KEY", pubDER), 0o644); err != nil {
		return "", "", err
	}
	return keyPath, pubPath, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

func encodeCertPEM(der []byte) []byte { return encodePEM("CERTIFICATE", der) }

func encodePEM(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

// IssueServingCertificate writes a serving certificate for ips, signed by
// the cluster's CA (which its API server verifies kubelet endpoints with,
// --kubelet-certificate-authority), to the cluster's pki directory as
// name.{crt,key}, and returns their paths: what an operator gives a
// nestlet-proxy installed by the chart (proxy.tls.secretName).
func (c *Cluster) IssueServingCertificate(name, commonName string, ips ...net.IP) (certPath, keyPath string, err error) {
	ck, err := c.ca.issue(filepath.Join(c.Dir, "pki"), name, pkix.Name{CommonName: commonName}, ips, nil)
	if err != nil {
		return "", "", err
	}
	return ck.CertPath, ck.KeyPath, nil
}
