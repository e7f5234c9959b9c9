package proxy

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/revoked"
)

// tunnelGuard decides which tunnels live, by node name:
//   - one live tunnel per name: a second one with another certificate is
//     refused while the first one's certificate is valid (an impostor with
//     a certificate of the same name cannot take the child's traffic; the
//     newest certificate takes over only once the old one expired or was
//     revoked); with the same certificate it replaces the first (the same
//     holder reconnecting, e.g. after a partition that left the old
//     connection half-open);
//   - a tunnel is closed when its certificate expires;
//   - revoked children's tunnels (`nestctl revoke`, pkg/revoked) are
//     refused, and closed the moment they are revoked.
//
// It holds each tunnel's connection as remotedialer takes it over.
type tunnelGuard struct {
	revoked *revoked.Watcher
	clock   clock.WithDelayedExecution

	mu    sync.Mutex
	conns map[string]map[net.Conn]*heldTunnel
}

// heldTunnel is a live tunnel's certificate and its expiry timer.
type heldTunnel struct {
	serial   string
	notAfter time.Time
	expiry   clock.Timer
}

// errTunnelConflict is the reason a second tunnel of a name is refused.
var errTunnelConflict = errors.New("conflict")

func newTunnelGuard(client kubernetes.Interface, clk clock.WithDelayedExecution) *tunnelGuard {
	g := &tunnelGuard{conns: map[string]map[net.Conn]*heldTunnel{}, clock: clk}
	g.revoked = revoked.New(client, g.closeRevoked)
	return g
}

func (g *tunnelGuard) run(ctx context.Context) { g.revoked.Run(ctx) }

// closeRevoked closes the tunnels of the revoked names.
func (g *tunnelGuard) closeRevoked(names map[string]bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name := range names {
		for c := range g.conns[name] {
			g.dropLocked(name, c)
			klog.Background().Info("Closed the tunnel of a revoked child", "node", name)
		}
	}
}

// holds reports whether this replica holds a tunnel of name.
func (g *tunnelGuard) holds(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns[name]) > 0
}

// admit reports why a tunnel of node name with cert is refused (nil:
// admitted). Caller holds no lock.
func (g *tunnelGuard) admit(name string, cert *x509.Certificate) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(name, cert)
}

func (g *tunnelGuard) admitLocked(name string, cert *x509.Certificate) error {
	if !g.revoked.HasSynced() {
		// A revoked child must not slip in while the list is read: the
		// agent dials again shortly.
		return fmt.Errorf("the children revoked in this cluster (configmap %s/%s) are not read yet: try again", metav1.NamespaceSystem, api.RevokedConfigMap)
	}
	if g.revoked.Has(name) {
		return fmt.Errorf("node %q was revoked in this cluster (configmap %s/%s): its tunnels are refused", name, metav1.NamespaceSystem, api.RevokedConfigMap)
	}
	now := g.clock.Now()
	if !now.Before(cert.NotAfter) {
		return fmt.Errorf("the certificate of node %q expired at %s", name, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	serial := cert.SerialNumber.String()
	for _, h := range g.conns[name] {
		if h.serial != serial && now.Before(h.notAfter) {
			return fmt.Errorf("%w: node %q already has a live tunnel with another certificate (serial %s, valid until %s); a second one is refused until that certificate expires or the node is revoked (nestctl revoke)",
				errTunnelConflict, name, h.serial, h.notAfter.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// track wraps rw so that the connection remotedialer hijacks from it is
// held under name until release. At the hijack the rules are checked again
// (a tunnel admitted meanwhile may have won): a refused connection is
// closed; live ones with the same certificate are replaced.
func (g *tunnelGuard) track(rw http.ResponseWriter, name string, cert *x509.Certificate) (http.ResponseWriter, func()) {
	var conn net.Conn
	t := &hijackTracker{ResponseWriter: rw, hijacked: func(c net.Conn) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if err := g.admitLocked(name, cert); err != nil {
			klog.Background().Info("Refused a tunnel", "node", name, "err", err)
			_ = c.Close()
			return
		}
		serial := cert.SerialNumber.String()
		for old, h := range g.conns[name] {
			if h.serial == serial {
				g.dropLocked(name, old)
				klog.Background().Info("Replaced a tunnel by a new one with the same certificate", "node", name)
			}
		}
		conn = c
		if g.conns[name] == nil {
			g.conns[name] = map[net.Conn]*heldTunnel{}
		}
		h := &heldTunnel{serial: serial, notAfter: cert.NotAfter}
		h.expiry = g.clock.AfterFunc(cert.NotAfter.Sub(g.clock.Now()), func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if h, ok := g.conns[name][c]; ok {
				h.expiry = nil // fired: nothing to stop
				g.dropLocked(name, c)
				klog.Background().Info("Closed a tunnel whose certificate expired", "node", name, "serial", serial)
			}
		})
		g.conns[name][c] = h
		klog.Background().Info("Opened a tunnel", "node", name, "serial", serial)
	}}
	return t, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if _, held := g.conns[name][conn]; held {
			g.dropLocked(name, conn)
			klog.Background().Info("Closed a tunnel", "node", name)
		}
	}
}

// dropLocked closes c and forgets it.
func (g *tunnelGuard) dropLocked(name string, c net.Conn) {
	h, ok := g.conns[name][c]
	if !ok {
		return
	}
	if h.expiry != nil {
		h.expiry.Stop()
	}
	_ = c.Close()
	delete(g.conns[name], c)
	if len(g.conns[name]) == 0 {
		delete(g.conns, name)
	}
}

// hijackTracker is a ResponseWriter that tells who hijacks its connection.
type hijackTracker struct {
	http.ResponseWriter
	hijacked func(net.Conn)
}

func (h *hijackTracker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	c, rw, err := hj.Hijack()
	if err == nil {
		h.hijacked(c)
	}
	return c, rw, err
}

// serveTunnel admits a child's tunnel (see tunnelGuard) and holds its
// connection while remotedialer serves it.
func (p *Proxy) serveTunnel(rw http.ResponseWriter, req *http.Request) {
	name, ok, _ := p.authorizeTunnel(req)
	if ok {
		cert := req.TLS.VerifiedChains[0][0]
		err := p.guard.admit(name, cert)
		if err == nil {
			err = p.heldElsewhere(name)
		}
		if err != nil {
			code := http.StatusForbidden
			if errors.Is(err, errTunnelConflict) {
				code = http.StatusConflict
			}
			http.Error(rw, err.Error(), code)
			return
		}
		var release func()
		rw, release = p.guard.track(rw, name, cert)
		defer release()
	} else if id, isPeer := p.peers.fromPeer(req); isPeer {
		defer p.peers.connected(id)()
	}
	p.tunnels.ServeHTTP(rw, req)
}
