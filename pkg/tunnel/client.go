// Package tunnel is the child's end of the reverse tunnel to a parent's
// nestlet-proxy: the agent dials out (a child needs no inbound connection),
// authenticates with its node certificate, and serves its virtual node's
// kubelet API over the tunnel, without any listening socket. The tunnel is
// rancher/remotedialer's (WebSocket, multiplexed connections, back
// pressure); this package adds the in-memory listener, the reconnect loop
// and the TLS setup.
package tunnel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rancher/remotedialer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Address is what the proxy dials through a tunnel: the only address an
// agent accepts, served by the agent's kubelet handler.
const Address = "nestlet-kubelet:10250"

// ClientConfig of Run. Fields without a stated default are required.
type ClientConfig struct {
	// URL is the proxy's wss:// tunnel endpoint, and CA the PEM bundle
	// that verifies its serving certificate.
	URL string
	CA  []byte
	// Certificate is the node's client certificate in the parent, or
	// GetClientCertificate (which wins when set) returns the one to present
	// at each connect: a renewed certificate is used from the next
	// reconnect on, and the tunnel up meanwhile is kept.
	Certificate          tls.Certificate
	GetClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// Handler serves the kubelet API requests that arrive through the
	// tunnel (already authenticated and authorised by the proxy).
	Handler http.Handler
	// Connected is called with true when a tunnel is up and false when it
	// drops (optional).
	Connected func(bool)
}

// Run holds a tunnel to the proxy until ctx ends, reconnecting with
// exponential backoff (1s to 1m, reset after a tunnel that lasted a
// minute). Connections in flight when a tunnel drops are closed, so their
// streams end with an error at the caller.
func Run(ctx context.Context, cfg ClientConfig) error {
	if cfg.URL == "" || len(cfg.CA) == 0 || cfg.Handler == nil {
		return errors.New("tunnel: URL, CA and Handler are required")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CA) {
		return errors.New("tunnel: no certificate in the proxy CA bundle")
	}
	dialer := &websocket.Dialer{
		HandshakeTimeout: 10 * time.Second,
		TLSClientConfig: &tls.Config{
			RootCAs:              pool,
			Certificates:         []tls.Certificate{cfg.Certificate},
			GetClientCertificate: cfg.GetClientCertificate,
			MinVersion:           tls.VersionTLS12,
		},
	}
	l := newPipeListener()
	srv := &http.Server{Handler: cfg.Handler, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()

	logger := klog.FromContext(ctx).WithValues("proxy", cfg.URL)
	connected := func(up bool) {
		if cfg.Connected != nil {
			cfg.Connected(up)
		}
	}
	// Any TCP address passes here and the pipe listener refuses all but
	// Address: a connect this side refuses would end the whole session
	// (every stream of the node) rather than that one connection.
	allow := func(proto, _ string) bool { return proto == "tcp" }
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: time.Minute}
	}
	backoff := newBackoff()
	for ctx.Err() == nil {
		start := time.Now()
		err := remotedialer.ConnectToProxyWithDialer(ctx, cfg.URL, nil, allow, dialer, l.dial, func(context.Context, *remotedialer.Session) error {
			logger.Info("Tunnel to the parent's proxy is up")
			connected(true)
			return nil
		})
		connected(false)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > time.Minute {
			backoff = newBackoff()
		}
		delay := backoff.Step()
		logger.Info("Tunnel to the parent's proxy is down; reconnecting", "err", err, "after", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	return nil
}

// pipeListener is a net.Listener whose connections come from dial (one end
// of an in-memory pipe each): no socket is opened.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context, network, address string) (net.Conn, error) {
	if network != "tcp" || address != Address {
		return nil, fmt.Errorf("tunnel: refusing to dial %s %s", network, address)
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		_ = client.Close()
		_ = server.Close()
		return nil, net.ErrClosed
	case <-ctx.Done():
		_ = client.Close()
		_ = server.Close()
		return nil, ctx.Err()
	}
}

// Accept implements net.Listener.
func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener.
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return Address }
