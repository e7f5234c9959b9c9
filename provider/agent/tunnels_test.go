package agent

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/gateway"
)

func pubKey(t *testing.T) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	require.NoError(t, err)
	return k.PublicKey()
}

func pfx(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

// A middle cluster: its children's CIDRs go to them; what its parents
// carry goes to the first parent by Target name, but what a child claims;
// the second parent of a diamond gets what the first does not carry.
func TestPlanPeers(t *testing.T) {
	c1, c2, p1, p2 := pubKey(t), pubKey(t), pubKey(t), pubKey(t)
	endpoint := netip.MustParseAddrPort("10.250.0.2:51820")
	peers, claimed := planPeers(
		map[string]gateway.Peer{
			"east-2": {PublicKey: c2, AllowedIPs: pfx("10.2.0.0/24")},
			"east-1": {PublicKey: c1, AllowedIPs: pfx("10.1.0.0/24")},
		},
		map[string]gateway.Peer{
			"b-backup": {PublicKey: p2, Endpoint: endpoint, Keepalive: time.Second, AllowedIPs: pfx("10.3.0.0/24", "10.4.0.0/24", "10.5.0.0/24")},
			"a-root":   {PublicKey: p1, Endpoint: endpoint, Keepalive: time.Second, AllowedIPs: pfx("10.3.0.0/24", "10.4.0.0/24", "10.2.0.0/24")},
		})
	require.Equal(t, []gateway.Peer{
		{PublicKey: c1, AllowedIPs: pfx("10.1.0.0/24")},
		{PublicKey: c2, AllowedIPs: pfx("10.2.0.0/24")},
		{PublicKey: p1, Endpoint: endpoint, Keepalive: time.Second, AllowedIPs: pfx("10.3.0.0/24", "10.4.0.0/24")},
		{PublicKey: p2, Endpoint: endpoint, Keepalive: time.Second, AllowedIPs: pfx("10.5.0.0/24")},
	}, peers)
	require.Len(t, claimed, 5)

	// By address, not by prefix: a child's merged /23 takes both halves
	// of it from the parent's routes, whatever their prefixes.
	peers, _ = planPeers(
		map[string]gateway.Peer{"east-2": {PublicKey: c2, AllowedIPs: pfx("10.128.2.0/23")}},
		map[string]gateway.Peer{"root": {PublicKey: p1, AllowedIPs: pfx("10.128.2.0/24", "10.128.8.0/24", "10.128.0.0/22")}})
	require.Equal(t, pfx("10.128.0.0/23", "10.128.8.0/24"), peers[1].AllowedIPs)

	// One cluster joined under two names is one peer.
	peers, _ = planPeers(map[string]gateway.Peer{
		"x": {PublicKey: c1, AllowedIPs: pfx("10.1.0.0/24")},
		"y": {PublicKey: c1, AllowedIPs: pfx("10.1.0.0/24", "10.9.0.0/24")},
	}, nil)
	require.Equal(t, []gateway.Peer{{PublicKey: c1, AllowedIPs: pfx("10.1.0.0/24", "10.9.0.0/24")}}, peers)
}

func TestParentPeer(t *testing.T) {
	k := pubKey(t)
	p, err := parentPeer(&api.GatewayParent{PublicKey: k.String(), Endpoint: "10.250.0.2:51820",
		Routes: []string{"10.1.0.0/24", "10.2.0.0/24", "10.3.0.7/24", "junk"}}, []string{"10.2.0.0/24"}, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, &gateway.Peer{PublicKey: k, Endpoint: netip.MustParseAddrPort("10.250.0.2:51820"), Keepalive: 5 * time.Second,
		AllowedIPs: pfx("10.1.0.0/24", "10.3.0.0/24")}, p, "its own subtree's CIDRs are not routed up")

	p, err = parentPeer(&api.GatewayParent{PublicKey: k.String(), Routes: []string{"10.128.2.0/24", "10.128.4.0/24"}}, []string{"10.128.2.0/23"}, time.Second)
	require.NoError(t, err)
	require.Equal(t, pfx("10.128.4.0/24"), p.AllowedIPs, "a route inside this cluster's merged prefix is its own")

	p, err = parentPeer(&api.GatewayParent{PublicKey: k.String()}, nil, time.Second)
	require.NoError(t, err)
	require.False(t, p.Endpoint.IsValid(), "no endpoint published: none")

	_, err = parentPeer(&api.GatewayParent{PublicKey: "not a key"}, nil, time.Second)
	require.Error(t, err)
	_, err = parentPeer(&api.GatewayParent{PublicKey: k.String(), Endpoint: "no such host.invalid:1"}, nil, time.Second)
	require.Error(t, err)
}

func TestTunnelCondition(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := pubKey(t)
	peer := &gateway.Peer{PublicKey: k, Endpoint: netip.MustParseAddrPort("10.250.0.2:51820")}
	for _, c := range []struct {
		name   string
		peer   *gateway.Peer
		st     *gateway.PeerStatus
		status string
		reason string
	}{
		{"no parent gateway", nil, nil, "Unknown", "NoParentGateway"},
		{"no endpoint", &gateway.Peer{PublicKey: k}, nil, "False", "NoGatewayEndpoint"},
		{"no handshake yet", peer, &gateway.PeerStatus{PublicKey: k}, "False", "TunnelDown"},
		{"not known to the gateway", peer, nil, "False", "TunnelDown"},
		{"fresh", peer, &gateway.PeerStatus{PublicKey: k, LastHandshake: now.Add(-time.Minute)}, "True", "TunnelUp"},
		{"stale", peer, &gateway.PeerStatus{PublicKey: k, LastHandshake: now.Add(-4 * time.Minute)}, "False", "TunnelDown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cond := tunnelCondition(c.peer, c.st, now)
			require.Equal(t, "Tunnel", cond.Type)
			require.Equal(t, c.status, string(cond.Status))
			require.Equal(t, c.reason, cond.Reason)
			require.NotEmpty(t, cond.Message)
		})
	}
}

// fakeGateway records the peers it is given and the reconnections asked.
type fakeGateway struct {
	key        wgtypes.Key
	peers      []gateway.Peer
	reconnects []wgtypes.Key
}

func (f *fakeGateway) PublicKey() wgtypes.Key { return f.key }
func (f *fakeGateway) SetPrivateKey(k wgtypes.Key) error {
	f.key = k.PublicKey()
	return nil
}
func (f *fakeGateway) Reconnect(k wgtypes.Key) error {
	f.reconnects = append(f.reconnects, k)
	return nil
}
func (f *fakeGateway) SetPeers(p []gateway.Peer) error       { f.peers = p; return nil }
func (f *fakeGateway) Status() ([]gateway.PeerStatus, error) { return nil, nil }
func (f *fakeGateway) Close()                                {}
func (f *fakeGateway) allowed(k wgtypes.Key) []netip.Prefix {
	for _, p := range f.peers {
		if p.PublicKey == k {
			return p.AllowedIPs
		}
	}
	return nil
}

// The parent's decorator makes each child with a gateway key a peer routed
// its subtree's CIDRs, and tells it the parent's gateway and what the
// parent carries; the CIDRs where two children overlap are routed to
// neither, and every other CIDR is.
func TestDecoratorGatewayRoutes(t *testing.T) {
	ka, kb, kc, kp := pubKey(t), pubKey(t), pubKey(t), pubKey(t)
	child := func(name string, key wgtypes.Key, cidrs ...string) *corev1.Node {
		raw, err := api.FormatSummary(api.Summary{Cluster: name, Covered: []string{name}, PodCIDRs: cidrs})
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelCluster: name},
			Annotations: map[string]string{api.AnnotationSummary: raw, api.AnnotationGatewayKey: key.String()}}}
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.1.0.0/24"}}},
		child("a", ka, "10.10.0.0/24"),
		child("b", kb, "10.244.0.0/16"),
		child("c", kc, "10.244.5.0/24", "10.60.0.0/24"),
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var objs []runtime.Object
	for _, n := range nodes {
		require.NoError(t, indexer.Add(n))
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	gw := &fakeGateway{key: pubKey(t)}
	tun := newTunnels(gw, "10.250.0.2:51820", 0, corelisters.NewNodeLister(indexer))
	var routed []netip.Prefix
	tun.routed = func(r []netip.Prefix) { routed = r }
	// This cluster's own parent carries 10.50.0.0/16 (and this cluster's
	// own CIDRs, which are never routed up).
	tun.setParent(t.Context(), "up", &api.GatewayParent{PublicKey: kp.String(), Endpoint: "10.250.0.9:51820",
		Routes: []string{"10.50.0.0/16", "10.1.0.0/24", "10.10.0.0/24"}}, []string{"10.1.0.0/24", "10.10.0.0/24"})
	d := &decorator{client: client, nodes: corelisters.NewNodeLister(indexer), tunnels: tun}
	for _, n := range []string{"a", "b", "c"} {
		_, err := d.sync(t.Context(), n)
		require.NoError(t, err)
	}
	require.Equal(t, pfx("10.10.0.0/24"), gw.allowed(ka))
	require.Equal(t, pfx("10.244.0.0/22", "10.244.4.0/24", "10.244.6.0/23", "10.244.8.0/21", "10.244.16.0/20", "10.244.32.0/19", "10.244.64.0/18", "10.244.128.0/17"),
		gw.allowed(kb), "b's /16 but c's /24 in it")
	require.Equal(t, pfx("10.60.0.0/24"), gw.allowed(kc), "c's CIDR that overlaps b's gets no route, its other one does")
	require.Equal(t, pfx("10.50.0.0/16"), gw.allowed(kp))
	var all []netip.Prefix
	for _, k := range []wgtypes.Key{ka, kb, kc, kp} {
		all = append(all, gw.allowed(k)...)
	}
	require.ElementsMatch(t, all, routed, "the route agents are told every CIDR routed into the tunnels")

	n, err := client.CoreV1().Nodes().Get(t.Context(), "a", metav1.GetOptions{})
	require.NoError(t, err)
	var gp api.GatewayParent
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[api.AnnotationGatewayParent]), &gp))
	require.Equal(t, api.GatewayParent{PublicKey: gw.key.String(), Endpoint: "10.250.0.2:51820",
		Routes: []string{"10.1.0.0/24", "10.10.0.0/24", "10.50.0.0/16"}, PeerKey: ka.String()}, gp,
		"this cluster's nodes, its routed children and what its parent carries; the child's key it knows")
	n, err = client.CoreV1().Nodes().Get(t.Context(), "c", metav1.GetOptions{})
	require.NoError(t, err)
	gp = api.GatewayParent{}
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[api.AnnotationGatewayParent]), &gp))
	require.Equal(t, kc.String(), gp.PeerKey, "c is a peer, for what does not overlap")

	// A child that goes loses its peer.
	require.NoError(t, indexer.Delete(nodes[1]))
	_, err = d.sync(t.Context(), "a")
	require.NoError(t, err)
	require.Empty(t, gw.allowed(ka))
}

// A rotation publishes the new key (each run's listener, every child
// decorated again); the tunnel to a parent is opened again once, when the
// parent first says it knows the new key, and not on every later read.
func TestKeyRotation(t *testing.T) {
	parentKey := pubKey(t)
	gw := &fakeGateway{key: pubKey(t)}
	tun := newTunnels(gw, "", time.Second, corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})))
	redecorated := make(chan struct{}, 4)
	tun.changed = func() { redecorated <- struct{}{} }
	published := 0
	stop := tun.onKeyChange("up", func() { published++ })
	parentNode := func(peerKey string) *corev1.Node {
		raw, err := json.Marshal(api.GatewayParent{PublicKey: parentKey.String(), Endpoint: "10.250.0.9:51820",
			Routes: []string{"10.50.0.0/16"}, PeerKey: peerKey})
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "me", Annotations: map[string]string{api.AnnotationGatewayParent: string(raw)}}}
	}
	own := func() ([]string, error) { return []string{"10.1.0.0/24"}, nil }
	ctx := t.Context()

	first := tun.publicKey()
	tun.watchParent(ctx, "up", parentNode(""), own)
	require.Empty(t, gw.reconnects, "the parent knows no key of this cluster yet")
	tun.watchParent(ctx, "up", parentNode(first), own)
	require.Equal(t, []wgtypes.Key{parentKey}, gw.reconnects, "the parent learned the key: the tunnel opens at once")
	tun.watchParent(ctx, "up", parentNode(first), own)
	require.Len(t, gw.reconnects, 1, "the same acknowledgement again: nothing to do")

	require.NoError(t, tun.rotate(ctx))
	second := tun.publicKey()
	require.NotEqual(t, first, second)
	require.Equal(t, 1, published, "the run's virtual node publishes the new key")
	<-redecorated // every child is told the new key
	tun.watchParent(ctx, "up", parentNode(first), own)
	require.Len(t, gw.reconnects, 1, "the parent still knows the old key: waiting")
	tun.watchParent(ctx, "up", parentNode(second), own)
	require.Equal(t, []wgtypes.Key{parentKey, parentKey}, gw.reconnects)

	stop()
	require.NoError(t, tun.rotate(ctx))
	require.Equal(t, 1, published, "a run that ended publishes nothing")
}

func TestRoutableCIDRs(t *testing.T) {
	require.Equal(t, []string{"10.128.3.0/24"}, routableCIDRs([]string{"10.128.2.0/23"}, []string{"10.128.2.0/24"}),
		"a merged prefix loses the part a sibling claims")
	require.Empty(t, routableCIDRs([]string{"10.128.2.0/24"}, []string{"10.128.2.0/23"}))
	require.Equal(t, []string{"10.1.0.0/24", "10.2.0.0/24"}, routableCIDRs([]string{"10.2.0.0/24", "10.1.0.0/24"}, nil))
}
