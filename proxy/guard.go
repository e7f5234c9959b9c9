package proxy

import (
	"bufio"
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/revoked"
	"github.com/nestlet/nestlet/pkg/tunnel"
)

// tunnelGuard decides which tunnels live, by node name:
//   - one live tunnel per name: a second one with another certificate is
//     refused while the first one's certificate is valid (an impostor with
//     a certificate of the same name cannot take the child's traffic),
//     unless it carries the live tunnel's handover (tunnel.HandoverHeader:
//     the child renewed its certificate and signed the new one with the
//     old key). Such a successor lives beside its predecessor, takes every
//     new connection, and the child closes the predecessor once its
//     streams ended (make before break). With the same certificate a
//     tunnel replaces the first (the same holder reconnecting, e.g. after
//     a partition that left the old connection half-open);
//   - a tunnel is closed when its certificate expires;
//   - revoked children's tunnels (`nestctl revoke`, pkg/revoked) are
//     refused, and closed the moment they are revoked.
//
// It holds each tunnel's connection as remotedialer takes it over, under a
// remotedialer client key of the tunnel's own (tunnelKeys): remotedialer
// dials through the oldest session of a key, and a successor must take
// the new connections at once.
type tunnelGuard struct {
	revoked *revoked.Watcher
	clock   clock.WithDelayedExecution

	mu    sync.Mutex
	conns map[string]map[net.Conn]*heldTunnel
	seq   uint64
}

// heldTunnel is a live tunnel's certificate, client key and expiry timer.
type heldTunnel struct {
	cert   *x509.Certificate
	serial string // cert's
	expiry clock.Timer
	key    string
	// seq orders the tunnels of a name by admission; superseded: a
	// successor took over, and this one only drains.
	seq        uint64
	superseded bool
}

// errTunnelConflict is the reason a second tunnel of a name is refused.
var errTunnelConflict = errors.New("conflict")

// tunnelKeys are the remotedialer client keys the tunnels of node name
// take: a live tunnel and its successors never share one ('#' is in no
// node name). A fifth renewal while four tunnels drain takes the oldest
// one's key, closing it.
func tunnelKeys(name string) []string {
	return []string{name, name + "#2", name + "#3", name + "#4"}
}

// admission is an admitted tunnel's client key, and whether it succeeds
// live ones (a verified handover).
type admission struct {
	key       string
	successor bool
}

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

// keys are the client keys to dial name through, best first: the newest
// tunnel this replica holds first, superseded ones last; every key of
// name when it holds none (another replica may).
func (g *tunnelGuard) keys(name string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	held := slices.Collect(maps.Values(g.conns[name]))
	if len(held) == 0 {
		return tunnelKeys(name)
	}
	slices.SortFunc(held, func(a, b *heldTunnel) int {
		if a.superseded != b.superseded {
			if a.superseded {
				return 1
			}
			return -1
		}
		return cmp.Compare(b.seq, a.seq)
	})
	keys := make([]string, len(held))
	for i, h := range held {
		keys[i] = h.key
	}
	return keys
}

// admit reports the client key of a tunnel of node name with cert and
// handover (tunnel.HandoverHeader, may be empty), or why it is refused.
// Caller holds no lock.
func (g *tunnelGuard) admit(name string, cert *x509.Certificate, handover string) (admission, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admitLocked(name, cert, handover)
}

func (g *tunnelGuard) admitLocked(name string, cert *x509.Certificate, handover string) (admission, error) {
	if !g.revoked.HasSynced() {
		// A revoked child must not slip in while the list is read: the
		// agent dials again shortly.
		return admission{}, fmt.Errorf("the children revoked in this cluster (configmap %s/%s) are not read yet: try again", metav1.NamespaceSystem, api.RevokedConfigMap)
	}
	if g.revoked.Has(name) {
		return admission{}, fmt.Errorf("node %q was revoked in this cluster (configmap %s/%s): its tunnels are refused", name, metav1.NamespaceSystem, api.RevokedConfigMap)
	}
	now := g.clock.Now()
	if !now.Before(cert.NotAfter) {
		return admission{}, fmt.Errorf("the certificate of node %q expired at %s", name, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	serial := cert.SerialNumber.String()
	live := g.conns[name]
	for _, h := range live {
		if h.serial == serial {
			return admission{key: h.key}, nil
		}
	}
	successor := false
	for _, h := range live {
		if h.superseded || !now.Before(h.cert.NotAfter) {
			continue
		}
		if handover != "" {
			err := tunnel.VerifyHandover(h.cert, cert.Raw, handover)
			if err == nil {
				successor = true
				continue
			}
			return admission{}, fmt.Errorf("%w: node %q already has a live tunnel with another certificate (serial %s) and the handover does not hold: %w", errTunnelConflict, name, h.serial, err)
		}
		return admission{}, fmt.Errorf("%w: node %q already has a live tunnel with another certificate (serial %s, valid until %s); a second one is refused until that certificate expires or the node is revoked (nestctl revoke), or comes with a handover signed by that certificate's key",
			errTunnelConflict, name, h.serial, h.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := freeKey(name, live)
	return admission{key: key, successor: successor}, err
}

// freeKey is the client key a new tunnel of name takes beside the live
// ones: one none of them has or, with all taken (renewals while their
// predecessors drain), the oldest superseded one's, which then goes.
func freeKey(name string, live map[net.Conn]*heldTunnel) (string, error) {
	taken := map[string]bool{}
	var oldest *heldTunnel
	for _, h := range live {
		taken[h.key] = true
		if h.superseded && (oldest == nil || h.seq < oldest.seq) {
			oldest = h
		}
	}
	for _, k := range tunnelKeys(name) {
		if !taken[k] {
			return k, nil
		}
	}
	if oldest == nil {
		return "", fmt.Errorf("%w: node %q has %d live tunnels already", errTunnelConflict, name, len(live))
	}
	return oldest.key, nil
}

// track wraps rw so that the connection remotedialer hijacks from it is
// held under name, with the client key of adm, until release. At the
// hijack the rules are checked again (a tunnel admitted meanwhile may have
// won): a refused connection is closed; live ones with the same client key
// are replaced; a successor supersedes the others.
func (g *tunnelGuard) track(rw http.ResponseWriter, name string, cert *x509.Certificate, handover string, adm admission) (http.ResponseWriter, func()) {
	var conn net.Conn
	t := &hijackTracker{ResponseWriter: rw, hijacked: func(c net.Conn) {
		g.mu.Lock()
		defer g.mu.Unlock()
		now, err := g.admitLocked(name, cert, handover)
		if err == nil && now != adm {
			err = fmt.Errorf("%w: another tunnel of the node was admitted meanwhile", errTunnelConflict)
		}
		if err != nil {
			klog.Background().Info("Refused a tunnel", "node", name, "err", err)
			_ = c.Close()
			return
		}
		serial := cert.SerialNumber.String()
		for old, h := range g.conns[name] {
			switch {
			case h.key == adm.key:
				g.dropLocked(name, old)
				klog.Background().Info("Replaced a tunnel by a new one", "node", name, "serial", h.serial)
			case adm.successor:
				h.superseded = true
			}
		}
		conn = c
		if g.conns[name] == nil {
			g.conns[name] = map[net.Conn]*heldTunnel{}
		}
		g.seq++
		h := &heldTunnel{cert: cert, serial: serial, key: adm.key, seq: g.seq}
		h.expiry = g.clock.AfterFunc(cert.NotAfter.Sub(g.clock.Now()), func() { go g.expire(name, c) })
		g.conns[name][c] = h
		klog.Background().Info("Opened a tunnel", "node", name, "serial", serial, "successor", adm.successor)
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

// expire closes the tunnel c of name, whose certificate expired, unless a
// successor took it over: a tunnel that drains streams of the same holder
// (the handover proves it) lives while a successor's certificate is valid.
// (Timers call it in a goroutine of its own: a fake clock's callbacks run
// under the clock's lock.)
func (g *tunnelGuard) expire(name string, c net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h, ok := g.conns[name][c]
	if !ok {
		return
	}
	h.expiry = nil // fired: nothing to stop
	now := g.clock.Now()
	if h.superseded {
		var until time.Time
		for _, o := range g.conns[name] {
			if !o.superseded && o.cert.NotAfter.After(until) {
				until = o.cert.NotAfter
			}
		}
		if until.After(now) {
			h.expiry = g.clock.AfterFunc(until.Sub(now), func() { go g.expire(name, c) })
			klog.Background().V(2).Info("Kept a tunnel whose certificate expired while its streams drain: a successor holds", "node", name, "serial", h.serial, "until", until)
			return
		}
	}
	g.dropLocked(name, c)
	klog.Background().Info("Closed a tunnel whose certificate expired", "node", name, "serial", h.serial)
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
// connection while remotedialer serves it under the client key the guard
// gave it (tunnelClientKey).
func (p *Proxy) serveTunnel(rw http.ResponseWriter, req *http.Request) {
	name, ok, _ := p.authorizeTunnel(req)
	if ok {
		cert := req.TLS.VerifiedChains[0][0]
		handover := req.Header.Get(tunnel.HandoverHeader)
		adm, err := p.guard.admit(name, cert, handover)
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
		rw, release = p.guard.track(rw, name, cert, handover, adm)
		defer release()
		req = req.WithContext(context.WithValue(req.Context(), tunnelKeyContext{}, adm.key))
	} else if id, isPeer := p.peers.fromPeer(req); isPeer {
		defer p.peers.connected(id)()
	}
	p.tunnels.ServeHTTP(rw, req)
}

// tunnelKeyContext holds, in a tunnel's request, its client key.
type tunnelKeyContext struct{}

// tunnelClientKey is remotedialer's authorizer: the client key serveTunnel
// admitted the request's tunnel under.
func tunnelClientKey(req *http.Request) (string, bool, error) {
	key, ok := req.Context().Value(tunnelKeyContext{}).(string)
	return key, ok && key != "", nil
}

// tunnelKey is the client key to dial node name through, and whether any
// replica of this proxy has a tunnel of name.
func (p *Proxy) tunnelKey(name string) (string, bool) {
	for _, k := range p.guard.keys(name) {
		if p.tunnels.HasSession(k) {
			return k, true
		}
	}
	return "", false
}
