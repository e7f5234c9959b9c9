package peers

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/gateway"
	"github.com/nestlet/nestlet/provider/peers/peerstest"
)

// A middle cluster: its children's CIDRs go to them; what its parents
// carry goes to the first parent by Target name, but what a child claims;
// the second parent of a diamond gets what the first does not carry.
func TestPlanPeers(t *testing.T) {
	c1, c2, p1, p2 := peerstest.PublicKey(), peerstest.PublicKey(), peerstest.PublicKey(), peerstest.PublicKey()
	endpoint := netip.MustParseAddrPort("10.250.0.2:51820")
	peers, claimed := planPeers(
		map[string]gateway.Peer{
			"east-2": {PublicKey: c2, AllowedIPs: peerstest.Prefixes("10.2.0.0/24")},
			"east-1": {PublicKey: c1, AllowedIPs: peerstest.Prefixes("10.1.0.0/24")},
		},
		nil,
		map[string]gateway.Peer{
			"b-backup": {PublicKey: p2, Endpoint: endpoint, Keepalive: time.Second, AllowedIPs: peerstest.Prefixes("10.3.0.0/24", "10.4.0.0/24", "10.5.0.0/24")},
			"a-root":   {PublicKey: p1, Endpoint: endpoint, Keepalive: time.Second, AllowedIPs: peerstest.Prefixes("10.3.0.0/24", "10.4.0.0/24", "10.2.0.0/24")},
		})
	require.Equal(t, []gateway.Peer{
		{PublicKey: c1, AllowedIPs: peerstest.Prefixes("10.1.0.0/24")},
		{PublicKey: c2, AllowedIPs: peerstest.Prefixes("10.2.0.0/24")},
		{PublicKey: p1, Endpoint: endpoint, Keepalive: time.Second, AllowedIPs: peerstest.Prefixes("10.3.0.0/24", "10.4.0.0/24")},
		{PublicKey: p2, Endpoint: endpoint, Keepalive: time.Second, AllowedIPs: peerstest.Prefixes("10.5.0.0/24")},
	}, peers)
	require.Len(t, claimed, 5)

	// By address, not by prefix: a child's merged /23 takes both halves
	// of it from the parent's routes, whatever their prefixes.
	peers, _ = planPeers(
		map[string]gateway.Peer{"east-2": {PublicKey: c2, AllowedIPs: peerstest.Prefixes("10.128.2.0/23")}}, nil,
		map[string]gateway.Peer{"root": {PublicKey: p1, AllowedIPs: peerstest.Prefixes("10.128.2.0/24", "10.128.8.0/24", "10.128.0.0/22")}})
	require.Equal(t, peerstest.Prefixes("10.128.0.0/23", "10.128.8.0/24"), peers[1].AllowedIPs)

	// One cluster joined under two names is one peer.
	peers, _ = planPeers(map[string]gateway.Peer{
		"x": {PublicKey: c1, AllowedIPs: peerstest.Prefixes("10.1.0.0/24")},
		"y": {PublicKey: c1, AllowedIPs: peerstest.Prefixes("10.1.0.0/24", "10.9.0.0/24")},
	}, nil, nil)
	require.Equal(t, []gateway.Peer{{PublicKey: c1, AllowedIPs: peerstest.Prefixes("10.1.0.0/24", "10.9.0.0/24")}}, peers)
}

func TestParentPeer(t *testing.T) {
	k := peerstest.PublicKey()
	p, err := parentPeer(&api.GatewayParent{PublicKey: k.String(), Endpoint: "10.250.0.2:51820",
		Routes: []string{"10.1.0.0/24", "10.2.0.0/24", "10.3.0.7/24", "junk"}}, []string{"10.2.0.0/24"}, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, &gateway.Peer{PublicKey: k, Endpoint: netip.MustParseAddrPort("10.250.0.2:51820"), Keepalive: 5 * time.Second,
		AllowedIPs: peerstest.Prefixes("10.1.0.0/24", "10.3.0.0/24")}, p, "its own subtree's CIDRs are not routed up")

	p, err = parentPeer(&api.GatewayParent{PublicKey: k.String(), Routes: []string{"10.128.2.0/24", "10.128.4.0/24"}}, []string{"10.128.2.0/23"}, time.Second)
	require.NoError(t, err)
	require.Equal(t, peerstest.Prefixes("10.128.4.0/24"), p.AllowedIPs, "a route inside this cluster's merged prefix is its own")

	p, err = parentPeer(&api.GatewayParent{PublicKey: k.String()}, nil, time.Second)
	require.NoError(t, err)
	require.False(t, p.Endpoint.IsValid(), "no endpoint published: none")

	_, err = parentPeer(&api.GatewayParent{PublicKey: "not a key"}, nil, time.Second)
	require.Error(t, err)
	_, err = parentPeer(&api.GatewayParent{PublicKey: k.String(), Endpoint: "no such host.invalid:1"}, nil, time.Second)
	require.Error(t, err)
}

func TestCondition(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k := peerstest.PublicKey()
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
			cond := condition(c.peer, c.st, now)
			require.Equal(t, "Tunnel", cond.Type)
			require.Equal(t, c.status, string(cond.Status))
			require.Equal(t, c.reason, cond.Reason)
			require.NotEmpty(t, cond.Message)
		})
	}
}

// A rotation publishes the new key (each run's listener, every child
// decorated again); the peer of a parent is opened again once, when the
// parent first says it knows the new key, and not on every later read.
func TestKeyRotation(t *testing.T) {
	parentKey := peerstest.PublicKey()
	gw := peerstest.NewGateway()
	tun := New(gw, "", time.Second, corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})))
	redecorated := make(chan struct{}, 4)
	tun.OnCarriedChange(func() { redecorated <- struct{}{} })
	published := 0
	stop := tun.OnKeyChange("up", func() { published++ })
	parentNode := func(peerKey string) *corev1.Node {
		raw, err := json.Marshal(api.GatewayParent{PublicKey: parentKey.String(), Endpoint: "10.250.0.9:51820",
			Routes: []string{"10.50.0.0/16"}, PeerKey: peerKey})
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "me", Annotations: map[string]string{api.AnnotationGatewayParent: string(raw)}}}
	}
	own := func() ([]string, error) { return []string{"10.1.0.0/24"}, nil }
	ctx := t.Context()

	first := tun.PublicKey()
	tun.WatchParent(ctx, "up", parentNode(""), own)
	require.Empty(t, gw.Reconnects, "the parent knows no key of this cluster yet")
	tun.WatchParent(ctx, "up", parentNode(first), own)
	require.Equal(t, []wgtypes.Key{parentKey}, gw.Reconnects, "the parent learned the key: the peer opens at once")
	tun.WatchParent(ctx, "up", parentNode(first), own)
	require.Len(t, gw.Reconnects, 1, "the same acknowledgement again: nothing to do")

	require.NoError(t, tun.Rotate(ctx))
	second := tun.PublicKey()
	require.NotEqual(t, first, second)
	require.Equal(t, 1, published, "the run's virtual node publishes the new key")
	<-redecorated // every child is told the new key
	tun.WatchParent(ctx, "up", parentNode(first), own)
	require.Len(t, gw.Reconnects, 1, "the parent still knows the old key: waiting")
	tun.WatchParent(ctx, "up", parentNode(second), own)
	require.Equal(t, []wgtypes.Key{parentKey, parentKey}, gw.Reconnects)

	stop()
	require.NoError(t, tun.Rotate(ctx))
	require.Equal(t, 1, published, "a run that ended publishes nothing")
}

// The route agents are told every CIDR routed to a peer, and no other:
// the children's (but where two overlap) and what the parents carry.
func TestRoutedIsWhatThePeersAreRouted(t *testing.T) {
	gw := peerstest.NewGateway()
	ka, kb, kp := peerstest.PublicKey(), peerstest.PublicKey(), peerstest.PublicKey()
	tun := New(gw, "10.250.0.2:51820", 0, corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})))
	var routed []netip.Prefix
	tun.routed = func(r []netip.Prefix) { routed = r }
	ctx := t.Context()
	tun.SetParent(ctx, "up", &api.GatewayParent{PublicKey: kp.String(), Endpoint: "10.250.0.9:51820",
		Routes: []string{"10.50.0.0/16", "10.1.0.0/24"}}, []string{"10.1.0.0/24"})
	tun.SetChild(ctx, "a", ka.String(), []string{"10.244.0.0/22", "10.244.4.0/24", "10.244.6.0/23"})
	tun.SetChild(ctx, "b", kb.String(), []string{"10.60.0.0/24"})
	var all []netip.Prefix
	for _, k := range []wgtypes.Key{ka, kb, kp} {
		all = append(all, gw.Allowed(k)...)
	}
	require.Len(t, gw.Allowed(kp), 1, "the parent carries 10.50.0.0/16 (this cluster's own CIDR is never routed up)")
	require.ElementsMatch(t, all, routed)
	require.NotContains(t, routed, netip.MustParsePrefix("10.244.5.0/24"), "what no peer is given is not routed")

	tun.SetChild(ctx, "b", "", nil)
	require.Empty(t, gw.Allowed(kb), "a child that goes loses its peer")
	require.NotContains(t, routed, netip.MustParsePrefix("10.60.0.0/24"))
}
