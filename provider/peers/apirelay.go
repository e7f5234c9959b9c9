package peers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
)

// This cluster's API server on the pod network (Config.APIAddress):
// the gateway's interface holds the address, routed like a pod CIDR (to
// the children as part of what this cluster carries, so every cluster
// below routes it here through the peers), and the agent relays each
// connection to it, byte for byte, to its own API server. TLS goes end to
// end: the relay sees neither tokens nor requests, and the API server
// authenticates the pod as it would on its own network. The children's
// agents give the pods made here (--pod-api=origin) this address in
// place of the URL they joined with, so a pod two levels down calls the
// cluster it was made in over the same peers as its traffic to pods,
// without the API server being reachable from the leaves.

// defaultAPIPort is the relay's port when Config.APIAddress has
// none: the port in-cluster clients expect of kubernetes.default.svc.
const defaultAPIPort = 443

// ParseAPIAddress parses Config.APIAddress: an IP, or IP:port.
func ParseAPIAddress(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("gateway API address %q: want an IP or IP:port", s)
	}
	return netip.AddrPortFrom(a.Unmap(), defaultAPIPort), nil
}

// apiUpstream is host:port of the API server rest config host names.
func apiUpstream(host string) (string, error) {
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		// A bare host[:port], as rest.Config allows.
		u, err = url.Parse("https://" + host)
		if err != nil {
			return "", fmt.Errorf("this cluster's API server %q: %w", host, err)
		}
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// Bounds of the relay: the clients are the pods of the whole subtree,
// children's included, so that none holds more than its part.
const (
	// relayPerClient bounds the connections relayed at once for one
	// client address (a pod: its watches and requests over a few
	// connections, far less).
	relayPerClient = 64
	// relayMax bounds the connections relayed at once in all.
	relayMax = 4096
)

// apiRelay relays the connections to the API address to the API server.
type apiRelay struct {
	ln       net.Listener
	upstream string
	conns    sync.WaitGroup
	// perClient and max bound the connections relayed at once.
	perClient, max int

	mu       sync.Mutex
	open     map[net.Conn]struct{}
	byClient map[netip.Addr]int
	total    int
}

// relayAPI listens on addr (on the gateway's interface, which holds it)
// and relays each connection to upstream.
func relayAPI(addr netip.AddrPort, upstream string) (*apiRelay, error) {
	var ln net.Listener
	var err error
	// The address was just given to the interface: a moment may pass
	// before the kernel lets a socket bind it (IPv6's duplicate address
	// detection, say).
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr.String()); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("relaying this cluster's API server on %s: %w", addr, err)
	}
	r := &apiRelay{ln: ln, upstream: upstream, perClient: relayPerClient, max: relayMax, open: map[net.Conn]struct{}{}, byClient: map[netip.Addr]int{}}
	go r.serve()
	return r, nil
}

func (r *apiRelay) serve() {
	log := klog.Background().WithName("api-relay")
	log.Info("Relaying this cluster's API server to the pods below", "address", r.ln.Addr().String(), "apiServer", r.upstream)
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Error(err, "Accepting")
			}
			return
		}
		client := addrOf(c.RemoteAddr())
		if !r.admit(client) {
			log.V(2).Info("Refusing a connection: too many relayed at once", "client", client, "perClient", r.perClient, "max", r.max)
			_ = c.Close()
			continue
		}
		r.conns.Add(1)
		go func() {
			defer r.conns.Done()
			defer r.release(client)
			r.relay(log, c)
		}()
	}
}

// relay copies both ways between c and a new connection to the API
// server, each direction closed for writing when the other side's ends.
func (r *apiRelay) relay(log klog.Logger, c net.Conn) {
	defer func() { _ = c.Close() }()
	up, err := net.DialTimeout("tcp", r.upstream, 10*time.Second)
	if err != nil {
		log.V(2).Info("Cannot reach this cluster's API server for a pod", "client", c.RemoteAddr().String(), "err", err)
		return
	}
	defer func() { _ = up.Close() }()
	if !r.track(c, up) {
		return
	}
	defer r.untrack(c, up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// admit counts a connection of client, false when it would be one too
// many (for client, or in all).
func (r *apiRelay) admit(client netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.total >= r.max || r.byClient[client] >= r.perClient {
		return false
	}
	r.total++
	r.byClient[client]++
	return true
}

// release uncounts a connection of client.
func (r *apiRelay) release(client netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total--
	if r.byClient[client]--; r.byClient[client] <= 0 {
		delete(r.byClient, client)
	}
}

// addrOf is the IP address of a, unmapped (invalid when a has none).
func addrOf(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// track records open connections, so close ends them (false: closing).
func (r *apiRelay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open == nil {
		return false
	}
	for _, c := range cs {
		r.open[c] = struct{}{}
	}
	return true
}

func (r *apiRelay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		delete(r.open, c)
	}
}

// close stops listening and ends every relayed connection.
func (r *apiRelay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for c := range r.open {
		_ = c.Close()
	}
	r.open = nil
	r.mu.Unlock()
	r.conns.Wait()
}

// apiAddressString is the API address as published
// (api.GatewayParent.APIAddress), "" without one.
func (t *Peers) apiAddressString() string {
	if !t.apiAddr.IsValid() {
		return ""
	}
	return t.apiAddr.String()
}

// APIPrefix is this cluster's API address on the pod network as a route
// (a /32 or /128), none without one (t nil, or no address).
func (t *Peers) APIPrefix() []string {
	if t == nil {
		return nil
	}
	return t.apiPrefix()
}

// apiPrefix is the API address as a route (a /32 or /128), none without.
func (t *Peers) apiPrefix() []string {
	if !t.apiAddr.IsValid() {
		return nil
	}
	a := t.apiAddr.Addr()
	return []string{netip.PrefixFrom(a, a.BitLen()).String()}
}

// startAPIRelay relays addr, which the gateway's interface holds, to the
// API server at restHost (rest.Config.Host).
func startAPIRelay(addr netip.AddrPort, restHost string) (*apiRelay, error) {
	up, err := apiUpstream(restHost)
	if err != nil {
		return nil, err
	}
	return relayAPI(addr, up)
}

// ParentRelay is where the parent's gateway relays its API server
// (api.GatewayParent.APIAddress), as this cluster's virtual node there
// last said: "" while it says nothing.
//
// Whether the parent offers one is known once its agent has decorated
// the node (api.AnnotationParentVersion) in a version that carries this
// gateway's key (the parent adds api.AnnotationGatewayParent in answer to
// the key). Until then a pod's identity waits, so that a delegate made
// in the first moments after a join does not keep calling the URL the
// agent joined with, which the pods may not reach; after relayWait a
// parent that never says (one older than the annotations) gets the URL.
type ParentRelay struct {
	v     atomic.Pointer[relayState]
	clock clock.Clock
	start time.Time
}

type relayState struct {
	addr  string
	known bool
}

// relayWait bounds how long pods wait for the parent to state its relay.
const relayWait = 30 * time.Second

// NewParentRelay returns a relay of a run starting now: nothing said yet.
func NewParentRelay(c clock.Clock) *ParentRelay {
	return &ParentRelay{clock: c, start: c.Now()}
}

// Set reads it from the virtual node n in the parent (nil: unchanged).
func (p *ParentRelay) Set(n *corev1.Node) {
	if n == nil {
		return
	}
	var gp api.GatewayParent
	if raw, ok := n.Annotations[api.AnnotationGatewayParent]; !ok || json.Unmarshal([]byte(raw), &gp) != nil {
		gp = api.GatewayParent{}
	}
	key, _ := api.ChildAnnotation(n, api.AnnotationGatewayKey)
	decorated := n.Annotations[api.AnnotationParentVersion] != "" && key != ""
	p.v.Store(&relayState{addr: gp.APIAddress, known: decorated || gp.APIAddress != ""})
}

// Get returns the relay's address ("" for none) and whether the parent
// has said, or relayWait has passed since the run started.
func (p *ParentRelay) Get() (string, bool) {
	st := p.v.Load()
	if st == nil {
		st = &relayState{}
	}
	return st.addr, st.known || p.clock.Since(p.start) >= relayWait
}
