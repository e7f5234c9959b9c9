package proxy

import (
	"crypto/x509"
	"errors"
	"net/http"
	"slices"
	"strings"
)

const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// authorizeTunnel admits a tunnel only with a node client certificate
// (verified against ClientCA by the TLS handshake) and keys it by the node
// name the certificate holds: a child can serve its own node, no other.
func (p *Proxy) authorizeTunnel(r *http.Request) (string, bool, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return "", false, nil
	}
	cert := r.TLS.VerifiedChains[0][0]
	name, ok := nodeName(cert)
	return name, ok, nil
}

// nodeName returns the node a certificate is for: CN system:node:<name>
// in the group (O) system:nodes.
func nodeName(cert *x509.Certificate) (string, bool) {
	cn := cert.Subject.CommonName
	if !strings.HasPrefix(cn, nodeUserPrefix) || !slices.Contains(cert.Subject.Organization, nodesGroup) {
		return "", false
	}
	name := strings.TrimPrefix(cn, nodeUserPrefix)
	return name, name != ""
}

func certPool(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no certificate in the client CA bundle")
	}
	return pool, nil
}
