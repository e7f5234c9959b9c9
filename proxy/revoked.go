package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/revoked"
)

// tunnelGuard refuses the tunnels of revoked children (`nestctl revoke`,
// pkg/revoked) and closes theirs the moment they are revoked: it holds
// each tunnel's connection, by node name, as remotedialer takes it over.
type tunnelGuard struct {
	revoked *revoked.Watcher

	mu    sync.Mutex
	conns map[string]map[net.Conn]bool
}

func newTunnelGuard(client kubernetes.Interface) *tunnelGuard {
	g := &tunnelGuard{conns: map[string]map[net.Conn]bool{}}
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
			_ = c.Close()
			klog.Background().Info("Closed the tunnel of a revoked child", "node", name)
		}
	}
}

// admit reports why the tunnel of node name is refused (nil: admitted).
func (g *tunnelGuard) admit(name string) error {
	if g.revoked.Has(name) {
		return fmt.Errorf("node %q was revoked in this cluster (configmap %s/%s): its tunnels are refused", name, metav1.NamespaceSystem, api.RevokedConfigMap)
	}
	return nil
}

// track wraps rw so that the connection remotedialer hijacks from it is
// held under name until release; one revoked meanwhile is closed at once.
func (g *tunnelGuard) track(rw http.ResponseWriter, name string) (http.ResponseWriter, func()) {
	var conn net.Conn
	t := &hijackTracker{ResponseWriter: rw, hijacked: func(c net.Conn) {
		g.mu.Lock()
		defer g.mu.Unlock()
		conn = c
		if g.revoked.Has(name) {
			_ = c.Close()
			return
		}
		if g.conns[name] == nil {
			g.conns[name] = map[net.Conn]bool{}
		}
		g.conns[name][c] = true
	}}
	return t, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if conn != nil {
			delete(g.conns[name], conn)
			if len(g.conns[name]) == 0 {
				delete(g.conns, name)
			}
		}
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

// serveTunnel admits a child's tunnel unless it was revoked, and holds its
// connection while remotedialer serves it.
func (p *Proxy) serveTunnel(rw http.ResponseWriter, req *http.Request) {
	name, ok, _ := p.authorizeTunnel(req)
	if ok {
		if err := p.guard.admit(name); err != nil {
			http.Error(rw, err.Error(), http.StatusForbidden)
			return
		}
		var release func()
		rw, release = p.guard.track(rw, name)
		defer release()
	}
	p.tunnels.ServeHTTP(rw, req)
}
