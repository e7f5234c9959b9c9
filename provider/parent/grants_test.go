package parent

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/provider/peers"
)

// poolGrants returns the grants of a cluster whose children may each claim
// a share of pool, with no grant of an admin: nodes are its nodes, gw its
// gateway (or nil).
func poolGrants(nodes corelisters.NodeLister, gw *peers.Peers, pool ...string) *grants {
	return newGrants(podcidrs.NewGrants(nil, nil), podcidrs.Strings(pool), 0, newAllocations(nil, ""), ownAddresses(nodes, &serviceCIDRs{}, gw))
}

// decideAll decides each claim in turn, as the decorator does node by
// node, and returns the decisions by child.
func decideAll(t *testing.T, g *grants, claims [][2]string) map[string]decision {
	t.Helper()
	out := map[string]decision{}
	for _, c := range claims {
		d, err := g.decide(t.Context(), c[0], podcidrs.Strings(strings.Split(c[1], ",")))
		require.NoError(t, err)
		out[c[0]] = d
	}
	return out
}

// A child is granted of its claim what the admin granted it, or a share of
// the pool that no other child holds, never this cluster's own addresses:
// the hostile claims of a child's summary change nothing for anyone else.
func TestGrantsDecide(t *testing.T) {
	own := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "root-1"},
		Spec:   corev1.NodeSpec{PodCIDRs: []string{"10.128.0.0/24"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.250.0.2"}}}}
	virtual := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "west", Labels: map[string]string{api.LabelCluster: "west"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.128.9.9"}}}}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(own))
	require.NoError(t, indexer.Add(virtual))
	services := &serviceCIDRs{informer: cache.NewSharedIndexInformer(&cache.ListWatch{}, &networkingv1.ServiceCIDR{}, 0, cache.Indexers{})}
	require.NoError(t, services.informer.GetStore().Add(&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12"}}}))
	pool := podcidrs.Strings([]string{"10.128.0.0/9", "10.96.0.0/12"})
	tests := []struct {
		name   string
		admin  map[string]string
		pool   []netip.Prefix
		claims [][2]string // child, claim, decided in this order
		// want is, by child, what it is routed ("" for nothing) and a
		// part of what it is told is refused ("" for nothing refused).
		want map[string][2]string
	}{{
		name: "from the pool, first come", pool: pool,
		claims: [][2]string{{"west", "10.128.3.0/24"}, {"east", "10.128.2.0/23"}},
		want:   map[string][2]string{"west": {"10.128.3.0/24", ""}, "east": {"10.128.2.0/24", "10.128.3.0/24 (held by cluster west)"}},
	}, {
		name: "all of IPv4 and a sibling's range: only what is free of the pool, within a share", pool: pool,
		claims: [][2]string{{"west", "10.128.3.0/24"}, {"east", "0.0.0.0/1,128.0.0.0/1"}},
		want:   map[string][2]string{"west": {"10.128.3.0/24", ""}, "east": {"", "outside this cluster's pool"}},
	}, {
		name: "a claim over a share is refused whole", pool: pool,
		claims: [][2]string{{"east", "10.130.0.0/15"}},
		want:   map[string][2]string{"east": {"", "more than one child's share"}},
	}, {
		name: "this cluster's own: its node's pod CIDR, a node address, its Service CIDRs", pool: pool,
		claims: [][2]string{{"east", "10.128.0.0/24,10.250.0.2/32,10.96.0.10/32,10.128.7.0/24"}},
		want:   map[string][2]string{"east": {"10.128.7.0/24", "this cluster's nodes' pod CIDRs"}},
	}, {
		name: "a node address written by a child is no reason to refuse another", pool: pool,
		claims: [][2]string{{"east", "10.128.9.0/24"}},
		want:   map[string][2]string{"east": {"10.128.9.0/24", ""}},
	}, {
		name: "a grant of the admin: that, not the pool", pool: pool, admin: map[string]string{"east": "10.128.4.0/24"},
		claims: [][2]string{{"east", "10.128.4.0/23"}},
		want:   map[string][2]string{"east": {"10.128.4.0/24", "outside what this cluster grants east: 10.128.4.0/24"}},
	}, {
		name: "a range granted to one child is held for it: the pool gives it no other", pool: pool, admin: map[string]string{"west": "10.128.8.0/22"},
		claims: [][2]string{{"east", "10.128.8.0/24"}},
		want:   map[string][2]string{"east": {"", "held by cluster west (granted)"}},
	}, {
		name: "a grant that does not parse grants nothing", pool: pool, admin: map[string]string{"east": "ten"},
		claims: [][2]string{{"east", "10.128.4.0/24"}},
		want:   map[string][2]string{"east": {"", "does not parse"}},
	}, {
		name:   "no grant and no pool: nothing",
		claims: [][2]string{{"east", "10.128.4.0/24"}},
		want:   map[string][2]string{"east": {"", "no pod CIDRs and has no pool"}},
	}, {
		name: "nothing claimed, nothing refused", pool: pool,
		claims: [][2]string{{"east", ""}},
		want:   map[string][2]string{"east": {"", ""}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admin := podcidrs.NewGrants(nil, nil)
			admin.Set(tt.admin)
			g := newGrants(admin, tt.pool, 16, newAllocations(nil, ""), ownAddresses(corelisters.NewNodeLister(indexer), services, nil))
			got := decideAll(t, g, tt.claims)
			for child, want := range tt.want {
				d := got[child]
				assert.Equal(t, want[0], podcidrs.Format(d.routed), "%s is routed", child)
				if want[1] == "" {
					assert.Equal(t, api.PodCIDROverlapNone, d.refused, child)
				} else {
					assert.Contains(t, d.refused, want[1], child)
				}
				routed, ok := g.routed(child)
				assert.True(t, ok)
				assert.Equal(t, want[0], strings.Join(routed, ","), "what the summary carries up of %s", child)
			}
		})
	}
}

// The children's shares of the pool outlive the agent: a restarted agent
// gives no child a range another held, and a child that left frees its.
func TestPoolSharesPersist(t *testing.T) {
	client := fake.NewClientset()
	pool := podcidrs.Strings([]string{"10.128.0.0/9"})
	none := func() []reserved { return nil }
	g := newGrants(podcidrs.NewGrants(nil, nil), pool, 16, newAllocations(client, "nestlet-system"), none)
	decideAll(t, g, [][2]string{{"west", "10.128.3.0/24"}})

	restarted := newGrants(podcidrs.NewGrants(nil, nil), pool, 16, newAllocations(client, "nestlet-system"), none)
	require.NoError(t, restarted.held.load(t.Context(), func(string) bool { return true }))
	got := decideAll(t, restarted, [][2]string{{"east", "10.128.3.0/24"}})
	assert.Empty(t, got["east"].routed, "west holds it still")
	_, decided := restarted.routed("west")
	assert.False(t, decided, "west is carried up once decided again")

	require.NoError(t, restarted.forget(t.Context(), "west"))
	got = decideAll(t, restarted, [][2]string{{"east", "10.128.3.0/24"}})
	assert.Equal(t, "10.128.3.0/24", podcidrs.Format(got["east"].routed), "west left: free")
	cm, err := client.CoreV1().ConfigMaps("nestlet-system").Get(t.Context(), api.PodCIDRAllocationsConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"east": "10.128.3.0/24"}, cm.Data)

	// Shares of children gone while no agent ran are not loaded.
	again := newGrants(podcidrs.NewGrants(nil, nil), pool, 16, newAllocations(client, "nestlet-system"), none)
	require.NoError(t, again.held.load(t.Context(), func(child string) bool { return child != "east" }))
	assert.Empty(t, again.held.all())
}
