package kubeletapi

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	certutil "k8s.io/client-go/util/cert"
)

// SelfSignedCertificate generates a serving certificate for hosts (IPs or
// DNS names; the first is the common name), signed by a CA of its own, as
// a kubelet without a serving certificate does. It returns the certificate
// and the PEM bundle that verifies it.
func SelfSignedCertificate(hosts []string) (tls.Certificate, []byte, error) {
	if len(hosts) == 0 {
		return tls.Certificate{}, nil, errors.New("generating a serving certificate: no host name or address to put in it")
	}
	var ips []net.IP
	var names []string
	for _, h := range hosts[1:] {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, h)
		}
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(hosts[0], ips, names)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generating a serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	// The first PEM block is the serving certificate, the second the CA
	// that signed it.
	return cert, certPEM, nil
}
