package proxy

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/nestlet/nestlet/pkg/kubeletapi"
)

// ServingCertificate loads certFile/keyFile, or generates a self-signed
// certificate for hosts (IPs or DNS names; the first is the common name).
// It returns the certificate and the PEM bundle that verifies it (the
// certificate file itself when given: its chain must verify).
func ServingCertificate(certFile, keyFile string, hosts []string) (tls.Certificate, []byte, error) {
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("loading the serving certificate: %w", err)
		}
		pem, err := os.ReadFile(certFile)
		return cert, pem, err
	}
	return kubeletapi.SelfSignedCertificate(hosts)
}
