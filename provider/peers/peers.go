// Package peers holds this cluster's gateway (provider/gateway) and its
// WireGuard peers: the gateway of each parent, which this cluster dials
// through its NAT, and the gateway of each child, which dials here, each
// routed the pod CIDRs on its side of the tree. Also here: the peers'
// status and metrics (status.go), key rotation (rotate.go), this cluster's
// API server relayed on the pod network (apirelay.go), and the routes
// published for the route agents of the cluster's other nodes
// (noderoutes.go).
//
// A peer is the WireGuard link between two gateways, for pod traffic; a
// tunnel is the reverse tunnel of the kubelet API (pkg/tunnel). Wire names
// older than that distinction keep "tunnel" for compatibility: the Target
// condition Tunnel, the annotations api.AnnotationGatewayTunnel and
// api.AnnotationGatewayTunnelStats.
package peers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/gateway"
)

// Config runs a gateway in the agent: one WireGuard interface carrying
// pod traffic to the parents (peers this cluster dials) and from the
// children (peers that dial it).
type Config struct {
	// Interface is the TUN interface's name. Default nestlet0.
	Interface string
	// ListenPort is the UDP port children's gateways dial. Default
	// gateway.DefaultPort.
	ListenPort int
	// Endpoint is host:port where children reach ListenPort (a public
	// address, a LoadBalancer's, a port forwarded by a NAT...); without it
	// no child can dial this gateway.
	Endpoint string
	// Keepalive keeps the peers of the parents open through NAT.
	// Default 25s.
	Keepalive time.Duration
	// Implementation is the WireGuard to run on: gateway.ImplementationAuto
	// (default: the kernel's where the host has it, else wireguard-go),
	// ImplementationKernel or ImplementationUserspace.
	Implementation string
	// APIAddress (IP, or IP:port; port 443 by default) is where the pods
	// of the clusters below reach this cluster's API server through the
	// peers: the interface holds it, this cluster routes it to its
	// children as one of its own, and the agent relays it to its API
	// server (apirelay.go). Empty: none, and the pods made here that
	// run below call the URL their cluster joined with.
	APIAddress string
	// NodeName is the node the agent runs on, on its network (the chart's
	// agent): the gateway's node, published with what it routes to the
	// peers for the route agents of the cluster's other nodes
	// (noderoutes.go). Empty: not published.
	NodeName string
	// DirectPaths is how many direct paths to other clusters' gateways,
	// not through the tree, this one tries at most (direct.go); 0: none.
	DirectPaths int
}

// Peers holds this cluster's gateway and its peers: each child whose
// virtual node here publishes a gateway key, routed its subtree's pod
// CIDRs (the decorator tells it, SetChild), and each parent that publishes
// its gateway on this cluster's virtual node there (the Target runs tell
// it, SetParent), routed what it carries beyond this cluster's subtree.
//
// Paths: a CIDR of a child's subtree goes to that child; what a parent
// carries goes to one parent, the first of them by Target name that
// carries it (in a diamond, the other parents are not used for it); an
// address claimed twice goes where it was claimed first, in that order
// (by address: a parent's prefix that covers a child's keeps the rest).
type Peers struct {
	gw       Device
	endpoint string
	// apiAddr is Config.APIAddress (invalid: none), relayed by api.
	apiAddr   netip.AddrPort
	api       *apiRelay
	keepalive time.Duration
	nodes     corelisters.NodeLister
	// changed is called when what this cluster carries (its children's
	// routes) changed: every child's virtual node is decorated again.
	changed func()
	// routed, when set, is told the CIDRs routed to the peers each time
	// they change (noderoutes.go).
	routed func([]netip.Prefix)

	mu       sync.Mutex
	children map[string]gateway.Peer // by virtual node
	parents  map[string]gateway.Peer // by Target, AllowedIPs: all they carry
	carried  []string
	routes   []netip.Prefix
	// acked is, by Target, the key of this gateway its parent last said
	// it knows (api.GatewayParent.PeerKey); keyListeners are told when the
	// key changes (each run's virtual node publishes it).
	acked        map[string]string
	keyListeners map[string]func()
	// parentAPI is, by Target, the address where that parent's gateway
	// relays its API server (api.GatewayParent.APIAddress), as a route.
	parentAPI map[string]netip.Prefix
	// nodeSource, when set, translates the nodes' own packets into the
	// tree (nodesource.go).
	nodeSource *nodeSource

	// Direct paths (direct.go). own is this cluster's subtree's pod
	// CIDRs, as last told by a Target run; childSubtrees what each child
	// lists of its subtree, childEndpoints where its packets come from;
	// parentDirs what each parent lists for this cluster, by Target;
	// direct the paths tried, by key; directView and pathsView what was
	// last told of the directories and of the paths.
	own            []netip.Prefix
	childSubtrees  map[string][]api.GatewayEntry
	childEndpoints map[string]netip.AddrPort
	parentDirs     map[string][]api.GatewayEntry
	directMax      int
	direct         map[wgtypes.Key]*directPeer
	directView     string
	pathsView      string
}

// Device is what Peers uses of a *gateway.Gateway (a fake in tests:
// provider/peers/peerstest).
type Device interface {
	PublicKey() wgtypes.Key
	SetPrivateKey(wgtypes.Key) error
	SetPeers([]gateway.Peer) error
	Reconnect(wgtypes.Key) error
	Status() ([]gateway.PeerStatus, error)
	Close()
}

// Start starts the gateway of cfg (filling its defaults) and, with
// cfg.APIAddress, the relay of this cluster's API server at restHost
// (rest.Config.Host). nodes are this cluster's nodes: their pod CIDRs are
// carried for the children.
func Start(cfg *Config, nodes corelisters.NodeLister, restHost string) (*Peers, error) {
	if cfg.Interface == "" {
		cfg.Interface = "nestlet0"
	}
	if cfg.ListenPort == 0 {
		cfg.ListenPort = gateway.DefaultPort
	}
	if cfg.Keepalive == 0 {
		cfg.Keepalive = 25 * time.Second
	}
	opts := gateway.Options{Interface: cfg.Interface, ListenPort: cfg.ListenPort, Implementation: cfg.Implementation,
		Logf: func(f string, args ...any) { klog.Background().Info("Gateway: " + fmt.Sprintf(f, args...)) }}
	var apiAddr netip.AddrPort
	if cfg.APIAddress != "" {
		var err error
		if apiAddr, err = ParseAPIAddress(cfg.APIAddress); err != nil {
			return nil, err
		}
		opts.Addresses = []netip.Prefix{netip.PrefixFrom(apiAddr.Addr(), apiAddr.Addr().BitLen())}
	}
	gw, err := gateway.Start(opts)
	// A replica that has just been elected may find the interface or the
	// port still held by the one it replaces, on the same node (the chart
	// runs the agent in the node's network), for as long as that one takes
	// to exit.
	for deadline := time.Now().Add(gatewayStartPatience); err != nil && !errors.Is(err, gateway.ErrNoTUN) && time.Now().Before(deadline); {
		klog.Background().Info("Gateway not started yet, trying again", "interface", cfg.Interface, "err", err)
		time.Sleep(500 * time.Millisecond)
		gw, err = gateway.Start(opts)
	}
	if err != nil {
		return nil, err
	}
	impl, fallback := gw.Implementation()
	if fallback != "" {
		klog.Background().Info("Gateway runs on WireGuard in userspace (wireguard-go): the kernel's is not available", "interface", cfg.Interface, "reason", fallback)
	} else {
		klog.Background().Info("Gateway runs", "interface", cfg.Interface, "implementation", impl)
	}
	t := New(gw, cfg.Endpoint, cfg.Keepalive, nodes)
	t.directMax = cfg.DirectPaths
	t.nodeSource = &nodeSource{iface: cfg.Interface, conn: func() (*nftables.Conn, error) { return nftables.New() }}
	if apiAddr.IsValid() {
		if t.api, err = startAPIRelay(apiAddr, restHost); err != nil {
			gw.Close()
			return nil, err
		}
		t.apiAddr = apiAddr
	}
	return t, nil
}

// gatewayStartPatience is how long Start retries a gateway that
// does not start.
const gatewayStartPatience = 20 * time.Second

// New returns the peers of gateway gw, which children dial at endpoint;
// the peers of parents are kept open with keepalive.
func New(gw Device, endpoint string, keepalive time.Duration, nodes corelisters.NodeLister) *Peers {
	return &Peers{gw: gw, endpoint: endpoint, keepalive: keepalive, nodes: nodes,
		children: map[string]gateway.Peer{}, parents: map[string]gateway.Peer{},
		acked: map[string]string{}, keyListeners: map[string]func(){}, parentAPI: map[string]netip.Prefix{},
		childSubtrees: map[string][]api.GatewayEntry{}, childEndpoints: map[string]netip.AddrPort{},
		parentDirs: map[string][]api.GatewayEntry{}, direct: map[wgtypes.Key]*directPeer{}}
}

// PublicKey is the gateway's key as published (base64).
func (t *Peers) PublicKey() string { return t.gw.PublicKey().String() }

// ParentAPIPrefixes are the addresses where this cluster's parents'
// gateways relay their API servers, as routes (none without a gateway):
// no child is granted them.
func (t *Peers) ParentAPIPrefixes() []netip.Prefix {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []netip.Prefix
	for _, p := range t.parentAPI {
		out = append(out, p)
	}
	return out
}

// OnCarriedChange calls f each time what this cluster carries for its
// children changes (its children's routes, its own nodes' pod CIDRs, its
// gateway's key): each child is to be told again (ParentAnnotation).
func (t *Peers) OnCarriedChange(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.changed = f
}

// PublicKeyOrNone is PublicKey, or "" without a gateway (t nil).
func (t *Peers) PublicKeyOrNone() string {
	if t == nil {
		return ""
	}
	return t.PublicKey()
}

// SetChild makes the child of virtual node name a peer, with its key and
// its subtree's pod CIDRs (none: removed; a child whose CIDRs overlap
// another node's gets no routes).
func (t *Peers) SetChild(ctx context.Context, name, key string, cidrs []string) {
	var peer *gateway.Peer
	if k, err := wgtypes.ParseKey(key); err == nil && len(cidrs) > 0 {
		peer = &gateway.Peer{PublicKey: k, AllowedIPs: prefixes(cidrs)}
	} else if key != "" && err != nil {
		klog.FromContext(ctx).Info("Ignoring a child's gateway key", "node", name, "err", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.children[name]
	if peer == nil {
		delete(t.childSubtrees, name)
		if !had {
			return
		}
		delete(t.children, name)
	} else {
		if had && old.PublicKey == peer.PublicKey && slices.Equal(old.AllowedIPs, peer.AllowedIPs) {
			return
		}
		t.children[name] = *peer
	}
	t.applyLocked(ctx)
}

// SetParent makes the parent of Target target a peer from what it
// published on this cluster's virtual node (nil: removed). own are the pod
// CIDRs of this cluster's subtree, never routed up.
func (t *Peers) SetParent(ctx context.Context, target string, gp *api.GatewayParent, own []string) {
	var peer *gateway.Peer
	if gp != nil {
		var err error
		if peer, err = parentPeer(gp, own, t.keepalive); err != nil {
			klog.FromContext(ctx).Info("Ignoring the parent's gateway", "target", target, "err", err)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.parentAPI, target)
	delete(t.parentDirs, target)
	if gp != nil {
		if len(gp.Directory) > 0 {
			t.parentDirs[target] = gp.Directory
		}
		if own != nil {
			t.own = prefixes(own)
		}
	}
	if gp != nil {
		if ap, err := ParseAPIAddress(gp.APIAddress); gp.APIAddress != "" && err == nil {
			t.parentAPI[target] = netip.PrefixFrom(ap.Addr(), ap.Addr().BitLen())
		}
	}
	old, had := t.parents[target]
	switch {
	case peer == nil && !had:
		return
	case peer == nil:
		delete(t.parents, target)
	case had && old.PublicKey == peer.PublicKey && old.Endpoint == peer.Endpoint && slices.Equal(old.AllowedIPs, peer.AllowedIPs):
		return
	default:
		t.parents[target] = *peer
	}
	t.applyLocked(ctx)
}

// parentPeer is the peer of a parent's gateway: what it carries, but the
// pod CIDRs own of this cluster's subtree, dialled at its endpoint and
// kept open.
func parentPeer(gp *api.GatewayParent, own []string, keepalive time.Duration) (*gateway.Peer, error) {
	k, err := wgtypes.ParseKey(gp.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("bad key: %w", err)
	}
	peer := &gateway.Peer{PublicKey: k, Keepalive: keepalive}
	if gp.Endpoint != "" {
		if peer.Endpoint, err = netip.ParseAddrPort(gp.Endpoint); err != nil {
			// A name: WireGuard takes addresses.
			addr, rerr := net.ResolveUDPAddr("udp", gp.Endpoint)
			if rerr != nil {
				return nil, fmt.Errorf("endpoint %q: %w", gp.Endpoint, rerr)
			}
			peer.Endpoint = addr.AddrPort()
		}
	}
	// What lies in this cluster's own subtree never goes up, also where
	// the parent's prefix covers more (a summary's merged prefix).
	peer.AllowedIPs = subtract(prefixes(gp.Routes), prefixes(own))
	return peer, nil
}

// applyLocked configures the gateway's peers and routes, and tells the
// children when what this cluster carries changed.
func (t *Peers) applyLocked(ctx context.Context) {
	peers, claimed := planPeers(t.children, t.directPeersLocked(), t.parents)
	if err := t.gw.SetPeers(peers); err != nil {
		klog.FromContext(ctx).Error(err, "Configuring the gateway's peers")
	}
	if routes := sortedPrefixes(claimed); t.routed != nil && !slices.Equal(routes, t.routes) {
		t.routes = routes
		t.routed(routes)
	}
	if t.nodeSource != nil {
		if err := t.nodeSource.set(planNodeSource(t.ownPodCIDRs(), t.sourcesKept(claimed))); err != nil {
			klog.FromContext(ctx).Error(err, "Translating the nodes' own packets into the tree")
		}
	}
	carried := t.carriedLocked(claimed)
	if !slices.Equal(carried, t.carried) {
		t.carried = carried
		if t.changed != nil {
			go t.changed()
		}
	}
}

// planPeers returns the gateway's peers: every child with its CIDRs, then
// every direct peer (direct.go) in its order, then every parent by Target
// name with what it carries that no peer before it claimed; and every CIDR
// claimed. One cluster under two names (the same key twice) is one peer.
func planPeers(children map[string]gateway.Peer, direct []gateway.Peer, parents map[string]gateway.Peer) ([]gateway.Peer, map[netip.Prefix]bool) {
	var claimed []netip.Prefix
	var peers []gateway.Peer
	claim := func(p gateway.Peer) {
		// Addresses, not prefixes: a parent's prefix that covers a
		// child's keeps only the rest.
		allowed := subtract(p.AllowedIPs, claimed)
		claimed = append(claimed, allowed...)
		if i := slices.IndexFunc(peers, func(q gateway.Peer) bool { return q.PublicKey == p.PublicKey }); i >= 0 {
			peers[i].AllowedIPs = append(peers[i].AllowedIPs, allowed...)
			if p.Endpoint.IsValid() && !peers[i].Endpoint.IsValid() {
				peers[i].Endpoint, peers[i].Keepalive = p.Endpoint, p.Keepalive
			}
			return
		}
		p.AllowedIPs = allowed
		peers = append(peers, p)
	}
	for _, name := range sortedKeys(children) {
		claim(children[name])
	}
	for _, p := range direct {
		claim(p)
	}
	for _, name := range sortedKeys(parents) {
		claim(parents[name])
	}
	set := map[netip.Prefix]bool{}
	for _, p := range claimed {
		set[p] = true
	}
	return peers, set
}

// carriedLocked is what this cluster carries for its children: its own
// nodes' pod CIDRs, its API address and every claimed route.
func (t *Peers) carriedLocked(claimed map[netip.Prefix]bool) []string {
	out := t.apiPrefix()
	for p := range claimed {
		out = append(out, p.String())
	}
	for _, p := range t.ownPodCIDRs() {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// refresh recomputes what this cluster carries (a node of its own came,
// changed its pod CIDRs or went).
func (t *Peers) refresh(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.applyLocked(ctx)
}

// ParentAnnotation is what this cluster tells the child of virtual node
// name about its gateway (api.AnnotationGatewayParent), with the child's
// key this gateway knows it by (none while it is no peer).
func (t *Peers) ParentAnnotation(name string) string {
	t.mu.Lock()
	routes := slices.Clone(t.carried)
	var peerKey string
	if p, ok := t.children[name]; ok {
		peerKey = p.PublicKey.String()
	}
	dir := t.directoryForLocked(name)
	t.mu.Unlock()
	raw, _ := json.Marshal(api.GatewayParent{PublicKey: t.PublicKey(), Endpoint: t.endpoint, Routes: routes, PeerKey: peerKey,
		APIAddress: t.apiAddressString(), Directory: dir})
	return string(raw)
}

// WatchParent keeps the parent of Target target a peer with what it
// publishes on n, this cluster's virtual node there.
func (t *Peers) WatchParent(ctx context.Context, target string, n *corev1.Node, own func() ([]string, error)) {
	raw, ok := n.Annotations[api.AnnotationGatewayParent]
	if !ok {
		t.SetParent(ctx, target, nil, nil)
		return
	}
	var gp api.GatewayParent
	if err := json.Unmarshal([]byte(raw), &gp); err != nil {
		klog.FromContext(ctx).Info("Ignoring the parent's gateway", "target", target, "err", err)
		return
	}
	cidrs, err := own()
	if err != nil {
		return
	}
	t.SetParent(ctx, target, &gp, cidrs)
	t.acknowledged(ctx, target, gp.PeerKey)
}

// Close stops the API relay and the gateway.
func (t *Peers) Close() {
	if t.api != nil {
		t.api.close()
	}
	t.gw.Close()
}
