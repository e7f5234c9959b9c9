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

// A parent tells each child the gateways outside its subtree, with the
// endpoints it sees them at; a child's list of its own subtree keeps only
// what the parent grants that child.
func TestDirectories(t *testing.T) {
	ctx := t.Context()
	gw := peerstest.NewGateway()
	p := New(gw, "10.250.0.2:51820", time.Second, noNodes())
	east, west := peerstest.PublicKey(), peerstest.PublicKey()
	west2 := peerstest.PublicKey()
	// Each child lists itself (its own nodes' pod CIDRs); west lists
	// west-2 too, with a range it was granted and one it was not (east's):
	// only the first is told on.
	entries := func(es ...api.GatewayEntry) string {
		raw, err := json.Marshal(es)
		require.NoError(t, err)
		return string(raw)
	}
	p.SetChildSubtree(ctx, "west", entries(api.GatewayEntry{PublicKey: west.String(), Routes: []string{"10.2.0.0/24"}},
		api.GatewayEntry{Cluster: "west-2", PublicKey: west2.String(), Endpoint: "10.250.0.9:51820", Routes: []string{"10.2.1.0/24", "10.1.0.0/24"}}))
	p.SetChildSubtree(ctx, "east", entries(api.GatewayEntry{PublicKey: east.String(), Routes: []string{"10.1.0.0/24"}}))
	p.SetChild(ctx, "east", east.String(), []string{"10.1.0.0/23"})
	p.SetChild(ctx, "west", west.String(), []string{"10.2.0.0/23"})
	// The endpoints come from the handshakes.
	p.stepDirect(ctx, time.Now(), []gateway.PeerStatus{
		{PublicKey: east, Endpoint: netip.MustParseAddrPort("10.250.0.4:51820")},
		{PublicKey: west, Endpoint: netip.MustParseAddrPort("10.250.0.5:51820")},
	})

	var gp api.GatewayParent
	require.NoError(t, json.Unmarshal([]byte(p.ParentAnnotation("east")), &gp))
	require.Equal(t, []api.GatewayEntry{
		{Cluster: "west", PublicKey: west.String(), Endpoint: "10.250.0.5:51820", Routes: []string{"10.2.0.0/24"}},
		{Cluster: "west-2", PublicKey: west2.String(), Endpoint: "10.250.0.9:51820", Routes: []string{"10.2.1.0/24"}},
	}, gp.Directory)
	// west is not told its own subtree.
	require.NoError(t, json.Unmarshal([]byte(p.ParentAnnotation("west")), &gp))
	require.Equal(t, []api.GatewayEntry{
		{Cluster: "east", PublicKey: east.String(), Endpoint: "10.250.0.4:51820", Routes: []string{"10.1.0.0/24"}},
	}, gp.Directory)
	// Its parents are told the whole subtree.
	var up []api.GatewayEntry
	require.NoError(t, json.Unmarshal([]byte(p.SubtreeAnnotation()), &up))
	require.Len(t, up, 3)
}

// A cluster dials what its parent lists, without routes while the path is
// tried; routed there once packets come through, back to the parent when
// they stop; failed when nothing ever came.
func TestDirectPathStates(t *testing.T) {
	ctx := t.Context()
	gw := peerstest.NewGateway()
	p := New(gw, "", time.Second, nodesWithPodCIDR("10.1.0.0/24"))
	p.SetDirectPaths(4)
	parent, west2, self := peerstest.PublicKey(), peerstest.PublicKey(), gw.Key
	ep := netip.MustParseAddrPort("10.250.0.9:51820")
	p.SetParent(ctx, "root", &api.GatewayParent{PublicKey: parent.String(), Endpoint: "10.250.0.2:51820",
		Routes: []string{"10.1.0.0/24", "10.2.0.0/24", "10.3.0.0/24"},
		Directory: []api.GatewayEntry{
			{Cluster: "west-2", PublicKey: west2.String(), Endpoint: ep.String(), Routes: []string{"10.2.0.0/24", "10.1.0.0/24"}},
			// Itself, listed by a confused parent: never a peer.
			{Cluster: "me", PublicKey: self.String(), Endpoint: "10.250.0.3:51820", Routes: []string{"10.3.0.0/24"}},
		}}, []string{"10.1.0.0/24"})
	now := time.Now()
	p.stepDirect(ctx, now, nil)
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24", "10.3.0.0/24"), gw.Allowed(parent))
	require.Empty(t, gw.Allowed(west2))
	peer := find(t, gw.Peers, west2)
	require.Equal(t, ep, peer.Endpoint)
	require.Equal(t, directKeepalive, peer.Keepalive)
	require.Len(t, gw.Peers, 2)

	// A handshake and bytes: up, routed its range (never this cluster's
	// own, 10.1.0.0/24).
	status := func(rx int64) []gateway.PeerStatus {
		return []gateway.PeerStatus{{PublicKey: west2, Endpoint: ep, LastHandshake: now, RxBytes: rx}}
	}
	now = now.Add(time.Second)
	p.stepDirect(ctx, now, status(148))
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24"), gw.Allowed(west2))
	require.Equal(t, peerstest.Prefixes("10.3.0.0/24"), gw.Allowed(parent))
	var paths []api.DirectPath
	require.NoError(t, json.Unmarshal([]byte(p.PathsAnnotation()), &paths))
	require.Equal(t, api.DirectUp, paths[0].State)

	// Silence while only keepalives go out: a late keepalive is no
	// reason to move the routes, up to directIdleSilence.
	sending := func(rx, tx int64) []gateway.PeerStatus {
		return []gateway.PeerStatus{{PublicKey: west2, Endpoint: ep, LastHandshake: now, RxBytes: rx, TxBytes: tx}}
	}
	now = now.Add(time.Second)
	p.stepDirect(ctx, now, sending(148, keepaliveBytes))
	now = now.Add(directSilence)
	p.stepDirect(ctx, now, sending(148, 2*keepaliveBytes))
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24"), gw.Allowed(west2), "idle: still direct")
	now = now.Add(directIdleSilence - directSilence)
	p.stepDirect(ctx, now, sending(148, 3*keepaliveBytes))
	require.Empty(t, gw.Allowed(west2), "idle and silent for too long: back to the tree")
	now = now.Add(time.Second)
	p.stepDirect(ctx, now, sending(180, 3*keepaliveBytes))
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24"), gw.Allowed(west2), "heard again: direct again")

	// Silence while data goes out: back to the tree after directSilence.
	now = now.Add(100 * time.Millisecond)
	p.stepDirect(ctx, now, sending(180, 3*keepaliveBytes+1400))
	now = now.Add(directSilence)
	p.stepDirect(ctx, now, sending(180, 3*keepaliveBytes+2800))
	require.Empty(t, gw.Allowed(west2))
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24", "10.3.0.0/24"), gw.Allowed(parent))
	// Packets again: direct again.
	now = now.Add(time.Second)
	p.stepDirect(ctx, now, sending(212, 3*keepaliveBytes+2800))
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24"), gw.Allowed(west2))

	// Data both ways, then nothing either way (the path cut under a
	// stream: this end's answers stop with what they answer): back to
	// the tree after directSilence, read late or not.
	now = now.Add(250 * time.Millisecond)
	p.stepDirect(ctx, now, sending(1600, 3*keepaliveBytes+4200))
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24"), gw.Allowed(west2))
	now = now.Add(time.Second)
	p.stepDirect(ctx, now, sending(1600, 3*keepaliveBytes+4200))
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24"), gw.Allowed(west2), "silent for less than directSilence")
	now = now.Add(directSilence) // a late reading
	p.stepDirect(ctx, now, sending(1600, 3*keepaliveBytes+4200))
	require.Empty(t, gw.Allowed(west2), "a path that carried data when it went silent: back to the tree after directSilence, not directIdleSilence")
	now = now.Add(time.Second)
	p.stepDirect(ctx, now, sending(1700, 3*keepaliveBytes+4200))
	require.Equal(t, peerstest.Prefixes("10.2.0.0/24"), gw.Allowed(west2))

	// Nothing more, for longer than a trial: failed, tried slowly.
	now = now.Add(directIdleSilence + time.Millisecond)
	p.stepDirect(ctx, now, status(212))
	now = now.Add(directTrial + time.Second)
	p.stepDirect(ctx, now, status(212))
	require.NoError(t, json.Unmarshal([]byte(p.PathsAnnotation()), &paths))
	require.Equal(t, api.DirectFailed, paths[0].State, paths[0].Reason)
	require.Contains(t, paths[0].Reason, "symmetric")
	require.Equal(t, directKeepaliveFailed, find(t, gw.Peers, west2).Keepalive)
	require.Empty(t, gw.Allowed(west2))

	// Off: no direct peer.
	p.SetDirectPaths(0)
	p.stepDirect(ctx, now, status(180))
	require.Len(t, gw.Peers, 1)
}

// A cluster with no nodes of its own (only children) tries no direct
// path: no directory lists it, so the other end would never dial back.
func TestNoDirectPathWithoutPodsOfItsOwn(t *testing.T) {
	ctx := t.Context()
	gw := peerstest.NewGateway()
	p := New(gw, "", time.Second, noNodes())
	p.SetDirectPaths(4)
	parent, west2 := peerstest.PublicKey(), peerstest.PublicKey()
	p.SetParent(ctx, "root", &api.GatewayParent{PublicKey: parent.String(), Endpoint: "10.250.0.2:51820",
		Routes: []string{"10.2.0.0/24"},
		Directory: []api.GatewayEntry{
			{Cluster: "west-2", PublicKey: west2.String(), Endpoint: "10.250.0.9:51820", Routes: []string{"10.2.0.0/24"}},
		}}, []string{"10.1.0.0/23"})
	p.stepDirect(ctx, time.Now(), nil)
	require.Len(t, gw.Peers, 1, "the parent only")
	require.Empty(t, p.PathsAnnotation())
	require.Empty(t, p.SubtreeAnnotation(), "listed nowhere")
}

func noNodes() corelisters.NodeLister {
	return corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
}

func find(t *testing.T, peers []gateway.Peer, k wgtypes.Key) gateway.Peer {
	t.Helper()
	for _, p := range peers {
		if p.PublicKey == k {
			return p
		}
	}
	t.Fatalf("no peer %s in %v", k, peers)
	return gateway.Peer{}
}

// nodesWithPodCIDR lists one node of this cluster's own, with cidr.
func nodesWithPodCIDR(cidr string) corelisters.NodeLister {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = idx.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}}})
	return corelisters.NewNodeLister(idx)
}
