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
	"crypto"
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
	// GetClientCertificate (which wins when set, called with nil) returns
	// the one to present: a renewed one opens a successor tunnel (Run).
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
// streams end with an error at the caller. A renewed certificate
// (GetClientCertificate) opens a second tunnel beside the first, with the
// first key's handover (HandoverHeader); the first one is closed once its
// connections ended, so that no stream is cut by a renewal.
func Run(ctx context.Context, cfg ClientConfig) error {
	if cfg.URL == "" || len(cfg.CA) == 0 || cfg.Handler == nil {
		return errors.New("tunnel: URL, CA and Handler are required")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.CA) {
		return errors.New("tunnel: no certificate in the proxy CA bundle")
	}
	l := newPipeListener()
	srv := &http.Server{Handler: cfg.Handler, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	r := &runner{cfg: cfg, pool: pool, listener: l, logger: klog.FromContext(ctx).WithValues("proxy", cfg.URL)}
	// Tunnels draining end with ctx too: nothing Run started outlives it.
	defer r.wg.Wait()

	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: time.Minute}
	}
	backoff := newBackoff()
	for ctx.Err() == nil {
		start := time.Now()
		cur, err := r.connect(ctx, r.certificate(), nil)
		if err == nil {
			r.logger.Info("Tunnel to the parent's proxy is up")
			r.connected(true)
			err = r.hold(ctx, cur)
			r.connected(false)
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errReopen) {
			r.logger.Info("Reopening the tunnel with the renewed certificate")
			continue
		}
		if time.Since(start) > time.Minute {
			backoff = newBackoff()
		}
		delay := backoff.Step()
		r.logger.Info("Tunnel to the parent's proxy is down; reconnecting", "err", err, "after", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	return nil
}

// errReopen: the tunnel was closed to open another with a renewed
// certificate (the proxy took no handover), at once.
var errReopen = errors.New("reopening with the renewed certificate")

// runner is Run's state.
type runner struct {
	cfg      ClientConfig
	pool     *x509.CertPool
	listener *pipeListener
	logger   klog.Logger
	wg       sync.WaitGroup // the sessions' goroutines
}

func (r *runner) connected(up bool) {
	if r.cfg.Connected != nil {
		r.cfg.Connected(up)
	}
}

// certificate is the client certificate to present now.
func (r *runner) certificate() *tls.Certificate {
	if r.cfg.GetClientCertificate != nil {
		if c, err := r.cfg.GetClientCertificate(nil); err == nil && c != nil && len(c.Certificate) > 0 {
			return c
		}
	}
	return &r.cfg.Certificate
}

// Timings of handovers (variables for tests): how often a renewed
// certificate is looked for, how long the proxy refusing a handover waits
// before it is asked again, and how long a predecessor must have carried
// no connection before it is closed (a connection the proxy dialed just
// before the handover is on its way).
var (
	renewCheckPeriod = time.Second
	handoverRetry    = 5 * time.Second
	drainQuiet       = 2 * time.Second
)

// hold keeps a tunnel up from cur until ctx ends (nil) or no tunnel is up
// any more: each renewed certificate opens a successor, and the tunnel it
// succeeds drains.
func (r *runner) hold(ctx context.Context, cur *session) error {
	tick := time.NewTicker(renewCheckPeriod)
	defer tick.Stop()
	var retryAt time.Time
	for {
		select {
		case <-ctx.Done():
			cur.close()
			<-cur.done
			return nil
		case <-cur.done:
			return cur.err
		case <-tick.C:
		}
		next := r.certificate()
		if cur.leaf == nil || len(next.Certificate) == 0 || bytes.Equal(next.Certificate[0], cur.leaf.Raw) || time.Now().Before(retryAt) {
			continue
		}
		handover, err := cur.handover(next)
		var succ *session
		if err == nil {
			succ, err = r.connect(ctx, next, http.Header{HandoverHeader: []string{handover}})
		}
		if err == nil {
			r.logger.Info("Tunnel handed over to the renewed certificate; the previous one closes once its connections ended")
			r.wg.Go(cur.drain)
			cur, retryAt = succ, time.Time{}
			continue
		}
		if ctx.Err() != nil {
			continue
		}
		lastTry := cur.leaf.NotAfter.Add(-max(cur.leaf.NotAfter.Sub(cur.leaf.NotBefore)/20, renewCheckPeriod))
		if !time.Now().Before(lastTry) {
			// The proxy keeps refusing (it predates handovers, or the
			// successor reached another replica) and closes this tunnel
			// at the expiry: reopen just before.
			cur.close()
			<-cur.done
			return errReopen
		}
		retryAt = time.Now().Add(handoverRetry)
		if retryAt.After(lastTry) {
			retryAt = lastTry
		}
		r.logger.Info("The proxy took no handover to the renewed certificate; asking again", "err", err, "after", time.Until(retryAt).Round(time.Second))
	}
}

// session is one tunnel.
type session struct {
	cert *tls.Certificate  // presented
	leaf *x509.Certificate // cert's, nil if unparseable

	mu      sync.Mutex
	conn    net.Conn // the TCP connection under the WebSocket
	streams int      // connections in flight
	last    time.Time
	changed chan struct{} // signalled when streams changes

	up, done chan struct{}
	err      error // once done
}

// connect opens a tunnel presenting cert, with headers, and returns it
// once it is up.
func (r *runner) connect(ctx context.Context, cert *tls.Certificate, headers http.Header) (*session, error) {
	s := &session{cert: cert, changed: make(chan struct{}, 1), up: make(chan struct{}), done: make(chan struct{})}
	s.leaf = cert.Leaf
	if s.leaf == nil && len(cert.Certificate) > 0 {
		s.leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	tlsCfg := &tls.Config{
		RootCAs:              r.pool,
		MinVersion:           tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil },
	}
	dialer := &websocket.Dialer{HandshakeTimeout: 10 * time.Second, TLSClientConfig: tlsCfg, NetDialContext: s.netDialer(ctx)}
	// Any TCP address passes here and the pipe listener refuses all but
	// Address: a connect this side refuses would end the whole session
	// (every stream of the node) rather than that one connection.
	allow := func(proto, _ string) bool { return proto == "tcp" }
	r.wg.Go(func() {
		defer close(s.done)
		s.err = remotedialer.ConnectToProxyWithDialer(context.WithoutCancel(ctx), r.cfg.URL, headers, allow, dialer, s.localDialer(r.listener.dial), func(sessCtx context.Context, _ *remotedialer.Session) error {
			close(s.up)
			// sessCtx ends when the session does.
			go func() {
				select {
				case <-ctx.Done():
				case <-sessCtx.Done():
				}
				s.close()
			}()
			return nil
		})
		if s.err == nil {
			s.err = errors.New("the proxy closed the tunnel")
		}
	})
	select {
	case <-s.up:
		return s, nil
	case <-s.done:
		return nil, s.err
	}
}

// close ends the session: closing its connection, rather than cancelling
// the session's context, is how remotedialer's client session ends
// without racing its own start (Session.Close against Serve's startPings).
func (s *session) close() {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// netDialer dials TCP for the WebSocket, within ctx (remotedialer's own
// context never ends: see connect), and keeps the connection.
func (s *session) netDialer(ctx context.Context) func(context.Context, string, string) (net.Conn, error) {
	d := &net.Dialer{}
	return func(dialCtx context.Context, network, addr string) (net.Conn, error) {
		dialCtx, cancel := context.WithCancel(dialCtx)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		c, err := d.DialContext(dialCtx, network, addr)
		if err == nil {
			s.mu.Lock()
			s.conn = c
			s.mu.Unlock()
		}
		return c, err
	}
}

// localDialer counts the connections dial opens for the session.
func (s *session) localDialer(dial remotedialer.Dialer) remotedialer.Dialer {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		s.count(1)
		return &countedConn{Conn: c, done: func() { s.count(-1) }}, nil
	}
}

func (s *session) count(d int) {
	s.mu.Lock()
	s.streams += d
	s.last = time.Now()
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// handover signs next with the session's key, for HandoverHeader.
func (s *session) handover(next *tls.Certificate) (string, error) {
	key, ok := s.cert.PrivateKey.(crypto.Signer)
	if !ok {
		return "", fmt.Errorf("the tunnel's key (%T) cannot sign a handover", s.cert.PrivateKey)
	}
	return SignHandover(key, next.Certificate[0])
}

// drain closes the session once it carried no connection for drainQuiet
// (the proxy keeps it past its certificate's expiry meanwhile, while the
// successor's is valid).
func (s *session) drain() {
	s.mu.Lock()
	s.last = time.Now()
	s.mu.Unlock()
	for {
		s.mu.Lock()
		n, last := s.streams, s.last
		s.mu.Unlock()
		var quiet <-chan time.Time
		if n == 0 {
			wait := drainQuiet - time.Since(last)
			if wait <= 0 {
				s.close()
				return
			}
			quiet = time.After(wait)
		}
		select {
		case <-s.changed:
		case <-quiet:
		case <-s.done:
			return
		}
	}
}

// countedConn calls done once, at its first Close.
type countedConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
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
