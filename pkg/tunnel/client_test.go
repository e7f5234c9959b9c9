package tunnel

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rancher/remotedialer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
)

// testProxy is the proxy's end of tunnels: a remotedialer server on TLS
// that keys every tunnel presenting a client certificate "node-a" (or, for
// a tunnel with a handover, "node-a" and the serial of its certificate).
type testProxy struct {
	tunnels *remotedialer.Server
	url     string // wss://
	ca      []byte // PEM of the serving certificate
	// refuseHandovers: tunnels with a handover get 409, as from a proxy
	// that predates them.
	refuseHandovers bool

	mu         sync.Mutex
	transports []*http.Transport
	serials    []string // of the client certificates, one per tunnel
	handovers  []string // HandoverHeader, one per tunnel
}

func startProxy(t *testing.T) *testProxy {
	t.Helper()
	return startProxyWith(t, false)
}

func startProxyWith(t *testing.T, refuseHandovers bool) *testProxy {
	t.Helper()
	p := &testProxy{refuseHandovers: refuseHandovers}
	p.tunnels = remotedialer.New(func(r *http.Request) (string, bool, error) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return "", false, nil
		}
		serial := r.TLS.PeerCertificates[0].SerialNumber.String()
		handover := r.Header.Get(HandoverHeader)
		p.mu.Lock()
		p.serials = append(p.serials, serial)
		p.handovers = append(p.handovers, handover)
		p.mu.Unlock()
		if handover != "" {
			return "node-a/" + serial, true, nil
		}
		return "node-a", true, nil
	}, remotedialer.DefaultErrorWriter)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.refuseHandovers && r.Header.Get(HandoverHeader) != "" {
			http.Error(w, "no handovers here", http.StatusConflict)
			return
		}
		p.tunnels.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.url = "wss://" + strings.TrimPrefix(srv.URL, "https://") + "/"
	p.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return p
}

// client returns an HTTP client whose connections go through node-a's
// tunnel to address. Its connections stay open until closeConns.
func (p *testProxy) client(t *testing.T, network, address string) *http.Client {
	t.Helper()
	return p.clientOf(t, "node-a", network, address)
}

// clientOf is client through the tunnel of key.
func (p *testProxy) clientOf(t *testing.T, key, network, address string) *http.Client {
	t.Helper()
	dial := p.tunnels.Dialer(key)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, network, address)
		},
	}
	p.mu.Lock()
	p.transports = append(p.transports, tr)
	p.mu.Unlock()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// closeConns closes the proxy's end of the tunnelled connections and waits
// until the agent has closed its end. The proxy closes first, one
// connection at a time, and before the tunnel goes: remotedialer v0.6.1
// has a data race when both ends of a tunnelled connection, or a
// connection and its session, close at once (rancher/remotedialer#254,
// fixed after v0.6.1), which -race reports.
func (p *testProxy) closeConns(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	transports := slices.Clone(p.transports)
	p.mu.Unlock()
	for _, tr := range transports {
		tr.CloseIdleConnections()
	}
	waitFor(t, "the agent to close its end of the connections", func(context.Context) bool {
		return !strings.Contains(agentGoroutines(), "net.(*pipe).")
	})
}

// get returns the body of a GET of url through c.
func get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// connectedLog records what Run reports through Connected.
type connectedLog struct {
	mu     sync.Mutex
	events []bool
}

func (c *connectedLog) record(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, up)
}

func (c *connectedLog) get() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// runAgent runs Run against p until the test ends, and returns a function
// that cancels it and waits for Run to return.
func runAgent(t *testing.T, p *testProxy, handler http.Handler, connected func(bool)) (stop func() error) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("system:node:node-a", nil, nil)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ClientConfig{URL: p.url, CA: p.ca, Certificate: cert, Handler: handler, Connected: connected})
	}()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("Run did not return after its context was cancelled")
				return
			}
			// Nothing Run started is left running.
			err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return agentGoroutines() == "", nil
			})
			if err != nil {
				runErr = errors.New("goroutines left running after Run returned:\n" + agentGoroutines())
			}
		})
		return runErr
	}
	t.Cleanup(func() { assert.NoError(t, stop()) })
	return stop
}

// agentGoroutines returns the stacks of the goroutines of the agent's end
// of tunnels: Run's own, remotedialer's client session, the tunnelled
// connections (in-memory pipes).
func agentGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		for _, marker := range []string{
			"nestlet/pkg/tunnel.Run(", "created by github.com/nestlet/nestlet/pkg/tunnel.Run",
			"remotedialer.ConnectToProxyWithDialer", "remotedialer.clientDial", "remotedialer.(*Session).startPings",
			"net.(*pipe).",
		} {
			if strings.Contains(g, marker) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

// waitFor polls cond for up to 30s.
func waitFor(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
	require.NoError(t, err, "waiting for %s", what)
}

func TestRun(t *testing.T) {
	p := startProxy(t)
	var events connectedLog
	var seen sync.Map // host and path of the requests the handler served
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Host+r.URL.Path, true)
		_, _ = io.WriteString(w, "hello")
	})
	stop := runAgent(t, p, handler, events.record)

	waitFor(t, "the tunnel of node-a", func(context.Context) bool { return p.tunnels.HasSession("node-a") })
	waitFor(t, "Connected(true)", func(context.Context) bool { return slices.Contains(events.get(), true) })
	assert.False(t, p.tunnels.HasSession("node-b"), "the tunnel is keyed by the authorizer's name only")

	body, err := get(t.Context(), p.client(t, "tcp", Address), "http://"+Address+"/containerLogs/ns/pod/app")
	require.NoError(t, err)
	assert.Equal(t, "hello", body)
	_, ok := seen.Load(Address + "/containerLogs/ns/pod/app")
	assert.True(t, ok, "the handler saw the request's host and path")

	// Several requests at once, each on its own tunnelled connection.
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() {
			body, err := get(t.Context(), p.client(t, "tcp", Address), "http://"+Address+"/pods")
			if err == nil && body != "hello" {
				err = errors.New("body " + body)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}

	p.closeConns(t)
	require.NoError(t, stop(), "Run returns nil once cancelled")
	assert.Equal(t, []bool{true, false}, events.get(), "Connected(true) when up, Connected(false) when cancelled")
	waitFor(t, "the proxy to drop the tunnel", func(context.Context) bool { return !p.tunnels.HasSession("node-a") })
}

func TestRunRefusesOtherAddresses(t *testing.T) {
	tests := []struct {
		name             string
		network, address string
	}{
		{name: "another host", network: "tcp", address: "example.com:80"},
		{name: "the kubelet port of localhost", network: "tcp", address: "127.0.0.1:10250"},
		{name: "the agent's name on another port", network: "tcp", address: "nestlet-kubelet:22"},
		{name: "the agent's address over UDP", network: "udp", address: Address},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t)
			runAgent(t, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "hello")
			}), nil)
			waitFor(t, "a request through the tunnel", func(ctx context.Context) bool {
				body, err := get(ctx, p.client(t, "tcp", Address), "http://"+Address+"/ok")
				return err == nil && body == "hello"
			})

			p.closeConns(t)

			// Read only: a write would race with the tunnel's teardown in
			// remotedialer v0.6.1 (see closeConns).
			conn, err := p.tunnels.Dialer("node-a")(t.Context(), tt.network, tt.address)
			if err == nil {
				// The refusal comes back as the connection's end.
				read := make(chan error, 1)
				go func() {
					_, err := conn.Read(make([]byte, 1))
					read <- err
				}()
				select {
				case err = <-read:
				case <-time.After(10 * time.Second):
					err = nil
					t.Errorf("the connection to %s %s is open", tt.network, tt.address)
				}
				_ = conn.Close()
			}
			require.Error(t, err, "dialing %s %s through the tunnel", tt.network, tt.address)
		})
	}
}

func TestRunConfig(t *testing.T) {
	ok := ClientConfig{URL: "wss://proxy.example/connect", CA: []byte("x"), Handler: http.NotFoundHandler()}
	tests := []struct {
		name   string
		mutate func(*ClientConfig)
		want   string
	}{
		{name: "no URL", mutate: func(c *ClientConfig) { c.URL = "" }, want: "required"},
		{name: "no CA", mutate: func(c *ClientConfig) { c.CA = nil }, want: "required"},
		{name: "no Handler", mutate: func(c *ClientConfig) { c.Handler = nil }, want: "required"},
		{name: "a CA that is not PEM", mutate: func(*ClientConfig) {}, want: "no certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.mutate(&cfg)
			connected := false
			cfg.Connected = func(bool) { connected = true }
			err := Run(t.Context(), cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.False(t, connected)
		})
	}
}

func TestRunReturnsWhenCancelledWhileReconnecting(t *testing.T) {
	// A proxy that hangs up at once: every attempt fails, and Run waits
	// to retry.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var attempts atomic.Int32
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			attempts.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-accepting
	})
	p := &testProxy{url: "wss://" + l.Addr().String() + "/", ca: startProxy(t).ca}

	var events connectedLog
	stop := runAgent(t, p, http.NotFoundHandler(), events.record)
	waitFor(t, "a failed attempt", func(context.Context) bool { return attempts.Load() > 0 })
	require.NoError(t, stop())
	assert.NotContains(t, events.get(), true, "never reported up")
}

func TestPipeListener(t *testing.T) {
	t.Run("dial reaches Accept", func(t *testing.T) {
		l := newPipeListener()
		defer func() { _ = l.Close() }()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				accepted <- c
			}
			close(accepted)
		}()
		client, err := l.dial(t.Context(), "tcp", Address)
		require.NoError(t, err)
		defer func() { _ = client.Close() }()
		server := <-accepted
		require.NotNil(t, server)
		defer func() { _ = server.Close() }()
		go func() { _, _ = client.Write([]byte("ping")) }()
		b := make([]byte, 4)
		_, err = io.ReadFull(server, b)
		require.NoError(t, err)
		assert.Equal(t, "ping", string(b))
		assert.Equal(t, Address, l.Addr().String())
	})

	t.Run("Accept returns net.ErrClosed after Close", func(t *testing.T) {
		l := newPipeListener()
		require.NoError(t, l.Close())
		_, err := l.Accept()
		assert.ErrorIs(t, err, net.ErrClosed)
		assert.NoError(t, l.Close(), "closing twice")
	})

	t.Run("a blocked Accept returns net.ErrClosed on Close", func(t *testing.T) {
		l := newPipeListener()
		errc := make(chan error, 1)
		go func() {
			_, err := l.Accept()
			errc <- err
		}()
		require.NoError(t, l.Close())
		assert.ErrorIs(t, <-errc, net.ErrClosed)
	})

	t.Run("dial after Close", func(t *testing.T) {
		l := newPipeListener()
		require.NoError(t, l.Close())
		_, err := l.dial(t.Context(), "tcp", Address)
		assert.ErrorIs(t, err, net.ErrClosed)
	})

	t.Run("dial gives up with its context", func(t *testing.T) {
		l := newPipeListener()
		defer func() { _ = l.Close() }()
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // nobody accepts
		_, err := l.dial(ctx, "tcp", Address)
		assert.ErrorIs(t, err, context.Canceled)
	})

	t.Run("dial refuses other addresses", func(t *testing.T) {
		l := newPipeListener()
		defer func() { _ = l.Close() }()
		for _, a := range [][2]string{{"tcp", "example.com:80"}, {"udp", Address}, {"tcp", "nestlet-kubelet:10251"}} {
			_, err := l.dial(t.Context(), a[0], a[1])
			assert.Error(t, err, "%s %s", a[0], a[1])
		}
	})
}

// shortCert is a client certificate with serial, valid from now for life.
func shortCert(t *testing.T, serial int64, life time.Duration) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "system:node:node-a", Organization: []string{"system:nodes"}},
		NotBefore:    time.Now().Add(-time.Second),
		NotAfter:     time.Now().Add(life),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A renewed certificate opens a second tunnel at once, with the first
// key's handover; the first tunnel stays while a stream through it lasts,
// which the handover does not cut, and closes once it carried nothing for
// a moment. Connected does not flap.
func TestRunHandsOverToRenewedCertificate(t *testing.T) {
	defer func(d time.Duration) { drainQuiet = d }(drainQuiet)
	drainQuiet = 200 * time.Millisecond
	p := startProxy(t)
	var current atomic.Pointer[tls.Certificate]
	first := shortCert(t, 1, time.Hour)
	current.Store(first)
	var events connectedLog
	release := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first line\n")
		if r.URL.Query().Get("follow") != "true" {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-release:
			_, _ = io.WriteString(w, "second line\n")
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ClientConfig{
			URL: p.url, CA: p.ca, Handler: handler, Connected: events.record,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return current.Load(), nil },
		})
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	waitFor(t, "the first tunnel", func(context.Context) bool { return p.tunnels.HasSession("node-a") })

	// A stream through the first tunnel, open across the handover.
	resp, err := p.client(t, "tcp", Address).Get("http://" + Address + "/containerLogs/ns/pod/app?follow=true")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	lines := bufio.NewReader(resp.Body)
	line, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "first line\n", line)

	renewed := shortCert(t, 2, time.Hour)
	current.Store(renewed)
	waitFor(t, "a second tunnel with the renewed certificate", func(context.Context) bool { return p.tunnels.HasSession("node-a/2") })
	p.mu.Lock()
	require.Equal(t, []string{"1", "2"}, p.serials)
	handover := p.handovers[1]
	p.mu.Unlock()
	firstLeaf, err := x509.ParseCertificate(first.Certificate[0])
	require.NoError(t, err)
	require.NoError(t, VerifyHandover(firstLeaf, renewed.Certificate[0], handover), "the handover is the first key's signature over the renewed certificate")
	body, err := get(t.Context(), p.clientOf(t, "node-a/2", "tcp", Address), "http://"+Address+"/pods")
	require.NoError(t, err, "the second tunnel serves")
	assert.Equal(t, "first line\n", body)

	time.Sleep(5 * drainQuiet)
	assert.True(t, p.tunnels.HasSession("node-a"), "the first tunnel stays while the stream lasts")
	close(release)
	line, err = lines.ReadString('\n')
	require.NoError(t, err, "the stream through the first tunnel is intact")
	assert.Equal(t, "second line\n", line)
	_ = resp.Body.Close()
	p.closeConns(t)
	waitFor(t, "the first tunnel to close once idle", func(context.Context) bool { return !p.tunnels.HasSession("node-a") })
	assert.True(t, p.tunnels.HasSession("node-a/2"))
	assert.Equal(t, []bool{true}, events.get(), "Connected does not flap at a handover")
}

// A proxy that takes no handover: the tunnel is reopened with the renewed
// certificate just before the first expires (the proxy closes it then),
// not long before.
func TestRunReopensWithRenewedCertificate(t *testing.T) {
	p := startProxyWith(t, true)
	var current atomic.Pointer[tls.Certificate]
	first := shortCert(t, 1, 4*time.Second)
	current.Store(first)
	var events connectedLog
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, ClientConfig{
			URL: p.url, CA: p.ca, Handler: http.NotFoundHandler(), Connected: events.record,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return current.Load(), nil },
		})
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	waitFor(t, "the first tunnel", func(context.Context) bool { return slices.Equal(events.get(), []bool{true}) })
	renewed := shortCert(t, 2, time.Hour)
	current.Store(renewed)
	leaf, err := x509.ParseCertificate(first.Certificate[0])
	require.NoError(t, err)
	waitFor(t, "a tunnel with the renewed certificate", func(context.Context) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		n := len(p.handovers)
		return n > 0 && p.serials[n-1] == "2" && p.handovers[n-1] == ""
	})
	reopened := time.Now()
	assert.True(t, reopened.Before(leaf.NotAfter), "reopened %v before the first certificate's expiry %v", reopened, leaf.NotAfter)
	assert.False(t, reopened.Before(leaf.NotAfter.Add(-2*time.Second)), "not reopened long before the first certificate's expiry (%v)", leaf.NotAfter.Sub(reopened))
	waitFor(t, "Connected again", func(context.Context) bool { return slices.Equal(events.get(), []bool{true, false, true}) })
	p.mu.Lock()
	assert.Contains(t, p.handovers, "", "handovers were tried before")
	p.mu.Unlock()
}
