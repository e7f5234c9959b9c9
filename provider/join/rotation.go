package join

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// ClientCert is the node certificate every connection to the parent
// presents, swapped in place when it is renewed: the clients built on it
// (RESTConfig), the reverse tunnel's reconnects (GetClientCertificate) and
// everything running on them stay as they are, as a kubelet's do when it
// rotates its client certificate. Safe for concurrent use.
type ClientCert struct {
	cur    atomic.Pointer[tls.Certificate]
	dialer *connrotation.Dialer
}

// NewClientCert starts with id's certificate.
func NewClientCert(id *Identity) (*ClientCert, error) {
	c := &ClientCert{dialer: connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)}
	if err := c.store(id); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *ClientCert) store(id *Identity) error {
	pair, err := tls.X509KeyPair(id.CertData, id.KeyData)
	if err != nil {
		return err
	}
	c.cur.Store(&pair)
	return nil
}

// Rotate presents id's certificate from now on and closes the connections
// made with the old one (client-go reconnects them at once, watches resume
// from where they were), so that none outlives the certificate it was
// authenticated with. The tunnel keeps its session: the parent's proxy
// checked the certificate when the tunnel was set up, and a reconnect
// presents the new one.
func (c *ClientCert) Rotate(id *Identity) error {
	if err := c.store(id); err != nil {
		return err
	}
	c.dialer.CloseAll()
	return nil
}

// GetClientCertificate is a tls.Config callback presenting the current
// certificate.
func (c *ClientCert) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return c.cur.Load(), nil
}

// RotatingRESTConfig returns a client config for the parent authenticated
// with cert, which follows its renewals: build clients once per run.
func (id *Identity) RotatingRESTConfig(cert *ClientCert) (*rest.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(id.CAData) {
		return nil, errors.New("the parent's CA bundle holds no certificate")
	}
	t := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig: &tls.Config{
			RootCAs:              pool,
			MinVersion:           tls.VersionTLS12,
			GetClientCertificate: cert.GetClientCertificate,
		},
		MaxIdleConnsPerHost: 25,
		DialContext:         cert.dialer.DialContext,
		IdleConnTimeout:     90 * time.Second,
	})
	cfg := id.RESTConfig()
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Transport = t
	return cfg, nil
}
