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

// fakeGateway records the peers it is given.
type fakeGateway struct {
	key   wgtypes.Key
	peers []gateway.Peer
}

func (f *fakeGateway) PublicKey() wgtypes.Key                { return f.key }
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
// parent carries; two children whose CIDRs overlap get no route, and the
// others keep theirs.
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
		child("c", kc, "10.244.5.0/24"),
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var objs []runtime.Object
	for _, n := range nodes {
		require.NoError(t, indexer.Add(n))
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	gw := &fakeGateway{key: pubKey(t)}
	tun := &tunnels{gw: gw, endpoint: "10.250.0.2:51820", nodes: corelisters.NewNodeLister(indexer),
		children: map[string]gateway.Peer{}, parents: map[string]gateway.Peer{}}
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
	require.Empty(t, gw.allowed(kb), "b overlaps c: no route")
	require.Empty(t, gw.allowed(kc), "c overlaps b: no route")
	require.Equal(t, pfx("10.50.0.0/16"), gw.allowed(kp))

	n, err := client.CoreV1().Nodes().Get(t.Context(), "a", metav1.GetOptions{})
	require.NoError(t, err)
	var gp api.GatewayParent
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[api.AnnotationGatewayParent]), &gp))
	require.Equal(t, api.GatewayParent{PublicKey: gw.key.String(), Endpoint: "10.250.0.2:51820",
		Routes: []string{"10.1.0.0/24", "10.10.0.0/24", "10.50.0.0/16"}}, gp, "this cluster's nodes, its routed children and what its parent carries")

	// A child that goes loses its peer.
	require.NoError(t, indexer.Delete(nodes[1]))
	_, err = d.sync(t.Context(), "a")
	require.NoError(t, err)
	require.Empty(t, gw.allowed(ka))
}
