package child

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/pkg/kubeletapi"
	"github.com/nestlet/nestlet/provider/join"
)

// servingCert is the certificate the agent presents when the parent's API
// server reaches its kubelet API directly (--kubelet-api=direct). It is
// self-signed until the parent issues one: the agent files a request for
// a kubelet serving certificate for its virtual node (signer
// kubernetes.io/kubelet-serving, as a kubelet with serverTLSBootstrap
// does), which the parent's agent approves for the node's own name and
// addresses (join.CheckServingRequest); client-go's certificate manager
// requests it and renews it before it expires. An API server given
// --kubelet-certificate-authority then verifies the agent as it verifies
// its kubelets.
type servingCert struct {
	selfSigned tls.Certificate
	manager    atomic.Pointer[certificate.Manager]
}

func newServingCert(host string) (*servingCert, error) {
	cert, _, err := kubeletapi.SelfSignedCertificate([]string{host})
	if err != nil {
		return nil, err
	}
	return &servingCert{selfSigned: cert}, nil
}

// getCertificate is a tls.Config callback: the parent's certificate once
// issued, the self-signed one before.
func (s *servingCert) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if m := s.manager.Load(); m != nil {
		if c := (*m).Current(); c != nil {
			return c, nil
		}
	}
	return &s.selfSigned, nil
}

// request asks the parent (nodeClient, as node) for a serving certificate
// of node at host, and renews it until ctx ends.
func (s *servingCert) request(ctx context.Context, nodeClient kubernetes.Interface, node, host string) error {
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = append(ips, ip)
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return nodeClient, nil },
		Template:         join.ServingTemplate(node, ips),
		SignerName:       certificatesv1.KubeletServingSignerName,
		Usages:           join.ServingUsages,
		CertificateStore: &memoryStore{},
		Name:             "kubelet-serving",
		// The parent's agent approves no longer a lifetime
		// (join.CheckLifetime).
		RequestedCertificateLifetime: ptr.To(join.NodeCertificateLifetime),
		Ctx:                          &ctx,
	})
	if err != nil {
		return err
	}
	s.manager.Store(&m)
	m.Start()
	go func() {
		<-ctx.Done()
		m.Stop()
	}()
	klog.FromContext(ctx).V(2).Info("Requesting a kubelet serving certificate from the parent", "node", node, "ips", ips)
	return nil
}

// memoryStore keeps the serving certificate in memory only: a restarted
// agent asks for a new one (the key never touches a disk).
type memoryStore struct {
	cur atomic.Pointer[tls.Certificate]
}

func (m *memoryStore) Current() (*tls.Certificate, error) {
	if c := m.cur.Load(); c != nil {
		return c, nil
	}
	e := certificate.NoCertKeyError("no kubelet serving certificate issued yet")
	return nil, &e
}

func (m *memoryStore) Update(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	m.cur.Store(&c)
	return &c, nil
}
