package peers

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/gateway"
)

// Direct paths. Traffic between two clusters of different branches climbs
// to their common ancestor and back, through a WireGuard peer per level.
// Every cluster is behind NAT, so neither can dial the other; but both
// dial their parents, whose gateways see the address and port their NATs
// map them to. That is what a direct peer needs:
//
//  1. Up: each cluster tells its parents its own entry (its key and its
//     own nodes' pod CIDRs) and the entries of its subtree
//     (api.AnnotationGatewaySubtree); a parent keeps of each entry no more
//     routes than it grants that child, and gives the child's own entry
//     the endpoint its gateway sees the child's packets come from.
//  2. Down: each parent tells each child the gateways outside the child's
//     subtree (api.GatewayParent.Directory): its other children's
//     subtrees and what its own parents told it.
//  3. Each cluster makes every entry its parents list (up to
//     Config.DirectPaths) a peer dialled at that endpoint, without routes,
//     with a keepalive each second. The other end does the same at the
//     same time: each end's first packets open its own NAT's mapping for
//     the other's, so the next ones pass (a NAT that keeps the source port
//     per destination; one that picks another port per destination lets
//     nothing through, and the path fails).
//  4. Once packets come through (a handshake, and something received in
//     the last directSilence), the entry's routes move from the parent's
//     peer to the direct one; when nothing comes through for
//     directSilence after this end sent data (directIdleSilence when it
//     had sent only keepalives for a while before the path went quiet),
//     they move back. Pod addresses do not
//     change, only the peer the gateway sends them to, so connections
//     survive both ways.
//
// A direct peer carries only the traffic between the two clusters' own
// pods, not their subtrees': a gateway takes from a peer only the sources
// it routes to it, so the answers must come the way the questions went.
// Routes stay the tree's to grant: a direct peer is routed only what the
// parents list for it, which each level filtered by what it grants, and
// never what lies in this cluster's own subtree.

const (
	// directKeepalive is the direct peers' keepalive while tried or up:
	// what each end receives at least once per interval, by which the
	// other sees the path alive.
	directKeepalive = time.Second
	// directKeepaliveFailed is their keepalive once the path failed: the
	// ends keep trying, slowly.
	directKeepaliveFailed = 5 * time.Second
	// directSilence is how long a direct path that this cluster sends
	// data into may bring nothing back before its routes go back to the
	// tree; directIdleSilence how long one it sends only keepalives into
	// may (a late keepalive on a busy machine is no reason to move idle
	// routes, and data sent later finds the path's state within a poll).
	directSilence     = 1750 * time.Millisecond
	directIdleSilence = 5 * time.Second
	// keepaliveBytes is what one keepalive adds to a peer's bytes sent
	// (an empty transport message); any more in one poll is data.
	keepaliveBytes = 32
	// directTrial is how long a direct path is tried before it is said
	// to have failed.
	directTrial = 20 * time.Second
	// directPoll is how often the direct paths' counters are read;
	// directIdlePoll how often the peers are, without a direct path
	// (for the endpoints of the children, told to the parents).
	directPoll     = 250 * time.Millisecond
	directIdlePoll = 2 * time.Second
	// maxDirectoryEntries bounds a directory (a parent's list for a
	// child, a child's list of its subtree).
	maxDirectoryEntries = 64
)

// directPeer is a candidate direct path and its state.
type directPeer struct {
	entry    api.GatewayEntry
	key      wgtypes.Key
	endpoint netip.AddrPort
	routes   []netip.Prefix
	state    string
	reason   string
	since    time.Time
	// rx is the bytes received as last read; heard when they last grew.
	// tx is the bytes sent as last read; sent when they last grew by more
	// than a keepalive.
	rx, tx      int64
	heard, sent time.Time
	// rtt is the round trip timed at the handshake that brought the path
	// up (0 when unknown).
	rtt time.Duration
}

// peer is d as the gateway's peer: routed its entry's routes while up.
func (d *directPeer) peer() gateway.Peer {
	p := gateway.Peer{PublicKey: d.key, Endpoint: d.endpoint, Keepalive: directKeepalive}
	switch d.state {
	case api.DirectUp:
		p.AllowedIPs = slices.Clone(d.routes)
	case api.DirectFailed:
		p.Keepalive = directKeepaliveFailed
	}
	return p
}

// observe reads the gateway's status s of d's peer (nil: none) at now,
// and returns the state the path is in and why.
func (d *directPeer) observe(now time.Time, s *gateway.PeerStatus) (string, string) {
	if s != nil && s.RxBytes > d.rx {
		d.rx, d.heard = s.RxBytes, now
	}
	if s != nil && s.TxBytes > d.tx {
		if s.TxBytes-d.tx > keepaliveBytes {
			d.sent = now
		}
		d.tx = s.TxBytes
	}
	// Idle: only keepalives went out for directSilence before the last
	// packet came (judged from the two, not from now: a path that
	// carried data when it went silent stays judged so, however late
	// the next reading comes).
	silence := directSilence
	if d.state == api.DirectUp && (d.sent.IsZero() || d.heard.Sub(d.sent) > directSilence) {
		silence = directIdleSilence
	}
	alive := s != nil && !s.LastHandshake.IsZero() && now.Sub(s.LastHandshake) < handshakeFresh && !d.heard.IsZero() && now.Sub(d.heard) < silence
	switch {
	case alive:
		return api.DirectUp, ""
	case d.state == api.DirectUp:
		return api.DirectTrying, fmt.Sprintf("nothing came through the direct path for %s: the traffic went back to the tree", silence)
	case d.state == api.DirectTrying && now.Sub(d.since) > directTrial:
		return api.DirectFailed, fmt.Sprintf("no handshake through %s within %s: a NAT between the two that maps each destination to another port (symmetric), or a firewall; the traffic goes through the tree", d.endpoint, directTrial)
	}
	return d.state, d.reason
}

// SetDirectPaths bounds the direct paths this cluster tries (0: none).
func (t *Peers) SetDirectPaths(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.directMax = n
}

// directPeersLocked returns the direct peers to configure, the most
// specific first (a cluster's before its ancestors' that cover it).
func (t *Peers) directPeersLocked() []gateway.Peer {
	ds := make([]*directPeer, 0, len(t.direct))
	for _, d := range t.direct {
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(a, b *directPeer) int {
		return cmp.Or(cmp.Compare(addresses(a.routes), addresses(b.routes)), strings.Compare(a.entry.Cluster, b.entry.Cluster))
	})
	out := make([]gateway.Peer, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.peer())
	}
	return out
}

// addresses is how many addresses ps hold (saturated).
func addresses(ps []netip.Prefix) float64 {
	var n float64
	for _, p := range ps {
		n += float64(uint64(1) << min(63, p.Addr().BitLen()-p.Bits()))
	}
	return n
}

// directCandidatesLocked are the direct paths to try: what the parents
// list, but this cluster, its own peers and its own subtree's routes, up
// to directMax; none for a cluster with no pods of its own.
func (t *Peers) directCandidatesLocked() map[wgtypes.Key]*directPeer {
	out := map[wgtypes.Key]*directPeer{}
	if t.directMax <= 0 {
		return out
	}
	if _, listed := t.selfEntryLocked(); !listed {
		// No pods of its own (a cluster of children only): nothing for a
		// direct peer to carry, and no entry in any directory, so the
		// other end would never dial back; it would only fail.
		return out
	}
	skip := map[wgtypes.Key]bool{t.gw.PublicKey(): true}
	var own []netip.Prefix
	for _, p := range t.children {
		skip[p.PublicKey] = true
		own = append(own, p.AllowedIPs...)
	}
	for _, p := range t.parents {
		skip[p.PublicKey] = true
	}
	own = append(own, t.own...)
	own = append(own, t.ownPodCIDRs()...)
	for _, target := range sortedKeys(t.parentDirs) {
		for _, e := range t.parentDirs[target] {
			k, err := wgtypes.ParseKey(e.PublicKey)
			if err != nil || skip[k] || out[k] != nil || len(out) == t.directMax {
				continue
			}
			ep, err := netip.ParseAddrPort(e.Endpoint)
			if err != nil {
				continue
			}
			routes := subtract(prefixes(e.Routes), own)
			if len(routes) == 0 {
				continue
			}
			out[k] = &directPeer{entry: e, key: k, endpoint: ep, routes: routes}
		}
	}
	return out
}

// RunDirect keeps the direct paths (and the endpoints of the children, as
// the parents are told them) in step with what the gateway sees, until
// ctx ends.
func (t *Peers) RunDirect(ctx context.Context, clk clock.WithTicker) {
	for {
		wait := directIdlePoll
		if st, err := t.gw.Status(); err == nil && t.stepDirect(ctx, clk.Now(), st) {
			wait = directPoll
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(wait):
		}
	}
}

// stepDirect is one reading of the gateway's peers st at now; it returns
// whether any direct path is tried or up.
func (t *Peers) stepDirect(ctx context.Context, now time.Time, st []gateway.PeerStatus) bool {
	logger := klog.FromContext(ctx)
	byKey := map[wgtypes.Key]*gateway.PeerStatus{}
	for i := range st {
		byKey[st[i].PublicKey] = &st[i]
	}
	t.mu.Lock()
	for name, p := range t.children {
		if s := byKey[p.PublicKey]; s != nil && s.Endpoint.IsValid() {
			t.childEndpoints[name] = s.Endpoint
		}
	}
	for name := range t.childEndpoints {
		if _, ok := t.children[name]; !ok {
			delete(t.childEndpoints, name)
		}
	}
	reconfigure := false
	want := t.directCandidatesLocked()
	for k, d := range t.direct {
		if w, ok := want[k]; !ok || w.endpoint != d.endpoint || !slices.Equal(w.routes, d.routes) {
			if ok && (w.endpoint == d.endpoint || d.state == api.DirectUp) {
				// New routes, or a new endpoint of a path that works
				// (the other end's NAT mapped it anew, and WireGuard
				// follows it as packets come): the state stays.
				d.routes, d.entry, d.endpoint = w.routes, w.entry, w.endpoint
				reconfigure = true
				continue
			}
			delete(t.direct, k)
			reconfigure = true
		}
	}
	for k, w := range want {
		if _, ok := t.direct[k]; !ok {
			w.state, w.since, w.heard = api.DirectTrying, now, time.Time{}
			w.reason = "dialling " + w.endpoint.String() + " while the other end dials this cluster"
			t.direct[k] = w
			reconfigure = true
			logger.Info("Trying a direct path", "cluster", w.entry.Cluster, "endpoint", w.endpoint)
		}
	}
	for k, d := range t.direct {
		s := byKey[k]
		next, reason := d.observe(now, s)
		if next != d.state {
			logger.Info("Direct path", "cluster", d.entry.Cluster, "state", next, "was", d.state, "reason", reason)
			if next == api.DirectUp || d.state == api.DirectUp || next == api.DirectFailed {
				reconfigure = true
			}
			d.state, d.reason, d.since = next, reason, now
			if next == api.DirectUp && s != nil {
				d.rtt = s.RTT
			}
		}
	}
	if reconfigure {
		t.applyLocked(ctx)
	}
	// What the parents are told (directories and paths) and the children
	// (directories only), again when it changed: a path's state reaches
	// the parents, not every child.
	dir, paths := t.directoriesViewLocked(), boundedJSON(t.pathsLocked())
	toParents := dir != t.directView || paths != t.pathsView
	toChildren := dir != t.directView
	t.directView, t.pathsView = dir, paths
	var listeners []func()
	if toParents {
		for _, f := range t.keyListeners {
			listeners = append(listeners, f)
		}
	}
	notify, busy := t.changed, len(t.direct) > 0
	t.mu.Unlock()
	for _, f := range listeners {
		f()
	}
	if toChildren && notify != nil {
		notify()
	}
	return busy
}

// pathsLocked are the direct paths as the parents are told them.
func (t *Peers) pathsLocked() []api.DirectPath {
	out := make([]api.DirectPath, 0, len(t.direct))
	for _, d := range t.direct {
		p := api.DirectPath{Cluster: d.entry.Cluster, State: d.state, Endpoint: d.endpoint.String(), Reason: d.reason, Since: d.since.UTC().Truncate(time.Second)}
		if d.state == api.DirectUp {
			p.RTTMicroseconds = d.rtt.Microseconds()
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b api.DirectPath) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out
}

// PathsAnnotation is what this cluster tells its parents of its direct
// paths (api.AnnotationGatewayPaths; "" without any).
func (t *Peers) PathsAnnotation() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	paths := t.pathsLocked()
	t.mu.Unlock()
	return boundedJSON(paths)
}

// directNamesLocked names the direct peers by key, for the metrics.
func (t *Peers) directNamesLocked(out map[string]string) {
	for k, d := range t.direct {
		out[k.String()] = "direct/" + d.entry.Cluster
	}
}

// directState is each direct peer's state by its metrics name.
func (t *Peers) directState() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for _, d := range t.direct {
		out["direct/"+d.entry.Cluster] = d.state
	}
	return out
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
