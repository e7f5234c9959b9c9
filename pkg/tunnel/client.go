// Package tunnel is the child's end of the reverse tunnel to a parent's
// nestlet-proxy: the agent dials out (a child needs no inbound connection),
// authenticates with its node certificate, and serves its virtual node's
// kubelet API over the tunnel, without any listening socket. The tunnel is
// rancher/remotedialer's (WebSocket, multiplexed connections, back
// pressure); this package adds the in-memory listener, the reconnect loop
// and the TLS setup.
package tunnel

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
	presented := &presentedCert{get: cfg.GetClientCertificate}
	tlsCfg := &tls.Config{
		RootCAs:      pool,
		Certificates: []tls.Certificate{cfg.Certificate},
		MinVersion:   tls.VersionTLS12,
	}
	if cfg.GetClientCertificate != nil {
		tlsCfg.GetClientCertificate = presented.getClientCertificate
	}
	conns := &lastConn{}
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, TLSClientConfig: tlsCfg, NetDialContext: conns.dialer(ctx)}
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
		var renewed atomic.Bool
		err := remotedialer.ConnectToProxyWithDialer(context.WithoutCancel(ctx), cfg.URL, nil, allow, dialer, l.dial, func(sessCtx context.Context, _ *remotedialer.Session) error {
			logger.Info("Tunnel to the parent's proxy is up")
			connected(true)
			c := conns.get()
			// sessCtx ends when the session does.
			go func() {
				select {
				case <-ctx.Done():
				case <-sessCtx.Done():
				}
				_ = c.Close()
			}()
			if cfg.GetClientCertificate != nil {
				go func() {
					if presented.waitRenewed(sessCtx) {
						renewed.Store(true)
						_ = c.Close()
					}
				}()
			}
			return nil
		})
		connected(false)
		if ctx.Err() != nil {
			return nil
		}
		if renewed.Load() {
			// The proxy closes a tunnel when its certificate expires and
			// refuses a second one for the name meanwhile: reopen with
			// the renewed certificate just before, at once.
			logger.Info("Reopening the tunnel with the renewed certificate")
			continue
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

// lastConn is the connection of the current tunnel, to end it when Run's
// context ends or for a renewed certificate: closing it, rather than
// cancelling the session's context, is how remotedialer's client session
// ends without racing its own start (Session.Close against Serve's
// startPings).
type lastConn struct {
	mu   sync.Mutex
	conn net.Conn
}

func (l *lastConn) get() net.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn
}

// dialer dials TCP for the WebSocket, within ctx (remotedialer's own
// context never ends: see Run), and keeps the connection.
func (l *lastConn) dialer(ctx context.Context) func(context.Context, string, string) (net.Conn, error) {
	d := &net.Dialer{}
	return func(dialCtx context.Context, network, addr string) (net.Conn, error) {
		dialCtx, cancel := context.WithCancel(dialCtx)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		c, err := d.DialContext(dialCtx, network, addr)
		if err == nil {
			l.mu.Lock()
			l.conn = c
			l.mu.Unlock()
		}
		return c, err
	}
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

// presentedCert remembers the client certificate presented at the last
// connect, to reopen the tunnel with a renewed one before it expires.
type presentedCert struct {
	get func(*tls.CertificateRequestInfo) (*tls.Certificate, error)

	mu   sync.Mutex
	leaf *x509.Certificate
}

func (p *presentedCert) getClientCertificate(info *tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c, err := p.get(info)
	if err != nil || c == nil {
		return c, err
	}
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	p.mu.Lock()
	p.leaf = leaf
	p.mu.Unlock()
	return c, nil
}

// renewCheckPeriod is how often, near the presented certificate's expiry,
// waitRenewed looks for a renewed one.
var renewCheckPeriod = time.Second

// waitRenewed returns true once the presented certificate is near its
// expiry (its last 5%, at least renewCheckPeriod) and another one is
// available; false when ctx ends first or the expiry passes.
func (p *presentedCert) waitRenewed(ctx context.Context) bool {
	p.mu.Lock()
	leaf := p.leaf
	p.mu.Unlock()
	if leaf == nil {
		return false
	}
	margin := max(leaf.NotAfter.Sub(leaf.NotBefore)/20, renewCheckPeriod)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(leaf.NotAfter.Add(-margin))):
	}
	tick := time.NewTicker(renewCheckPeriod)
	defer tick.Stop()
	for time.Now().Before(leaf.NotAfter) {
		if c, err := p.get(nil); err == nil && c != nil && len(c.Certificate) > 0 && !bytes.Equal(c.Certificate[0], leaf.Raw) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return false
}
