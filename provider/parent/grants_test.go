package parent

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/provider/peers"
	"github.com/nestlet/nestlet/provider/peers/peerstest"
)

// loadedChildren is a record of children read (and kept in memory only).
func loadedChildren(t *testing.T) *children {
	kids := newChildren(nil, "", "")
	require.NoError(t, kids.load(context.Background()))
	return kids
}

// poolGrants returns the grants of a cluster whose children may each claim
// a share of pool, with no grant of an admin: nodes are its nodes, gw its
// gateway (or nil).
func poolGrants(nodes corelisters.NodeLister, gw *peers.Peers, pool ...string) *grants {
	kids := newChildren(nil, "", "")
	_ = kids.load(context.Background())
	return newGrants(podcidrs.NewGrants(nil, nil), podcidrs.Strings(pool), 0, kids, ownAddresses(nodes, kids, newServiceCIDRs(nil), gw))
}

// none says that no other child covers the same pods.
func none(string) bool { return false }

// decideAll decides each claim in turn, as the decorator does node by
// node, and returns the last decision of each child.
func decideAll(t *testing.T, g *grants, claims [][2]string) map[string]decision {
	t.Helper()
	out := map[string]decision{}
	for _, c := range claims {
		d, err := g.decide(c[0], podcidrs.Strings(strings.Split(c[1], ",")), none)
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
	// A child that took its label off: its taint still says it is one.
	unlabelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "south"},
		Spec:   corev1.NodeSpec{PodCIDRs: []string{"10.128.12.0/24"}, Taints: []corev1.Taint{api.ProviderTaint()}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.128.13.13"}}}}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*corev1.Node{own, virtual, unlabelled} {
		require.NoError(t, indexer.Add(n))
	}
	services := newServiceCIDRs(nil)
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &networkingv1.ServiceCIDR{}, 0, cache.Indexers{})
	require.NoError(t, inf.GetStore().Add(&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12"}}}))
	services.informer.Store(&inf)
	// This cluster's parent relays its API server at 10.129.0.1.
	gw := peers.New(peerstest.NewGateway(), "", 0, corelisters.NewNodeLister(indexer))
	gw.SetParent(context.Background(), "up", &api.GatewayParent{PublicKey: peerstest.PublicKey().String(), APIAddress: "10.129.0.1:443"}, nil)
	pool := podcidrs.Strings([]string{"10.128.0.0/9", "10.96.0.0/12", "fd00:128::/40"})
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
		name: "over a share: what fits, the rest refused", pool: pool,
		claims: [][2]string{{"east", "10.130.0.0/15"}},
		want:   map[string][2]string{"east": {"10.130.0.0/16", "10.131.0.0/16 (beyond one child's share"}},
	}, {
		name: "IPv6 in /64s: a /48 fits a share, a /47 half", pool: pool,
		claims: [][2]string{{"east", "fd00:128::/47"}},
		want:   map[string][2]string{"east": {"fd00:128::/48", "fd00:128:1::/48 (beyond one child's share"}},
	}, {
		name: "this cluster's own: its node's pod CIDR, a node address, its Service CIDRs, its parent's API address", pool: pool,
		claims: [][2]string{{"east", "10.128.0.0/24,10.250.0.2/32,10.96.0.10/32,10.129.0.1/32,10.128.7.0/24"}},
		want:   map[string][2]string{"east": {"10.128.7.0/24", "this cluster's nodes' pod CIDRs"}},
	}, {
		name: "a node address written by a child is no reason to refuse another", pool: pool,
		claims: [][2]string{{"east", "10.128.9.0/24,10.128.13.0/24,10.128.12.0/24"}},
		want:   map[string][2]string{"east": {"10.128.9.0/24,10.128.12.0/23", ""}},
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
			kids := loadedChildren(t)
			g := newGrants(admin, tt.pool, 16, kids, ownAddresses(corelisters.NewNodeLister(indexer), kids, services, gw))
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
				assert.True(t, kids.known(child), "%s is a known child now", child)
			}
		})
	}
}

// A child claiming all of IPv4 gets neither a sibling's range nor the
// parent's own, and from the free pool one share at most.
func TestGrantsAllOfIPv4(t *testing.T) {
	own := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "root-1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.128.0.0/24"}}}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(own))
	g := poolGrants(corelisters.NewNodeLister(indexer), nil, "10.128.0.0/9")
	got := decideAll(t, g, [][2]string{{"west", "10.128.3.0/24"}, {"east", "0.0.0.0/1,128.0.0.0/1"}})
	routed := podcidrs.SetOf(got["east"].routed)
	v4, _ := routed.Size()
	assert.Equal(t, int64(65536), v4.Int64(), "one share of the pool: %s", podcidrs.Format(got["east"].routed))
	assert.True(t, routed.Minus(podcidrs.SetOf(podcidrs.Strings([]string{"10.128.0.0/9"}))).Empty(), "inside the pool")
	assert.True(t, routed.Intersect(podcidrs.SetOf(podcidrs.Strings([]string{"10.128.3.0/24", "10.128.0.0/24"}))).Empty(), "not west's, not the parent's")
	for _, why := range []string{"outside this cluster's pool", "10.128.3.0/24 (held by cluster west)", "10.128.0.0/24 (this cluster's nodes' pod CIDRs)", "beyond one child's share"} {
		assert.Contains(t, got["east"].refused, why)
	}
	assert.Equal(t, "10.128.3.0/24", podcidrs.Format(got["west"].routed), "west keeps its range")
}

// A share of the pool is held: a claim that shrinks for a while gives
// nothing away, and one that grows beyond a share keeps what it held (a
// grandchild's share that pushes its parent's claim over loses only the
// excess, never the parent's own).
func TestPoolSharesAreHeld(t *testing.T) {
	g := poolGrants(corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), nil, "10.128.0.0/9")
	decideAll(t, g, [][2]string{{"mid", "10.128.1.0/24,10.128.2.0/24"}, {"west", "10.128.5.0/24"}})

	got := decideAll(t, g, [][2]string{{"mid", "10.128.1.0/24"}, {"west", "10.128.2.0/24"}})
	assert.Equal(t, "10.128.1.0/24", podcidrs.Format(got["mid"].routed), "only what it claims is routed")
	assert.Contains(t, got["west"].refused, "10.128.2.0/24 (held by cluster mid)", "mid's cordoned node's range stays mid's")
	got = decideAll(t, g, [][2]string{{"mid", "10.128.1.0/24,10.128.2.0/24"}})
	assert.Equal(t, "10.128.1.0/24,10.128.2.0/24", podcidrs.Format(got["mid"].routed), "back as it was")

	got = decideAll(t, g, [][2]string{{"mid", "10.128.1.0/24,10.128.2.0/24,10.129.0.0/16"}})
	routed := podcidrs.SetOf(got["mid"].routed)
	assert.True(t, podcidrs.SetOf(podcidrs.Strings([]string{"10.128.1.0/24", "10.128.2.0/24"})).Minus(routed).Empty(), "what mid held stays: %s", podcidrs.Format(got["mid"].routed))
	v4, _ := routed.Size()
	assert.Equal(t, int64(65536), v4.Int64(), "the /16 more fills its share")
	assert.Contains(t, got["mid"].refused, "10.129.254.0/23 (beyond one child's share", "the rest of it is refused")

	g.forget("mid")
	got = decideAll(t, g, [][2]string{{"west", "10.128.2.0/24"}})
	assert.Equal(t, "10.128.2.0/24", podcidrs.Format(got["west"].routed), "mid's node is gone: its share is free")
	assert.True(t, g.kids.known("mid"), "and mid stays a child's name")
}

// A range another child holds that covers the same pods (a diamond, the
// same cluster twice) is routed through that one, not said to be refused.
func TestGrantsThroughAnother(t *testing.T) {
	g := poolGrants(corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})), nil, "10.128.0.0/9")
	decideAll(t, g, [][2]string{{"east", "10.128.1.0/24,10.128.7.0/24"}})
	d, err := g.decide("west", podcidrs.Strings([]string{"10.128.2.0/24", "10.128.7.0/24"}), func(other string) bool { return other == "east" })
	require.NoError(t, err)
	assert.Equal(t, "10.128.2.0/24", podcidrs.Format(d.routed), "the shared leaf's range goes through east")
	assert.Equal(t, api.PodCIDROverlapNone, d.refused)
}

// Nothing is decided before the record of the children is read.
func TestGrantsWaitForTheRecord(t *testing.T) {
	kids := newChildren(nil, "", "")
	g := newGrants(podcidrs.NewGrants(nil, nil), podcidrs.Strings([]string{"10.128.0.0/9"}), 16, kids, func() []reserved { return nil })
	_, err := g.decide("east", nil, none)
	require.ErrorIs(t, err, errNotLoaded)
	require.NoError(t, kids.load(context.Background()))
	_, err = g.decide("east", nil, none)
	require.NoError(t, err)
}

// The record outlives the agent: a restarted agent knows every child and
// gives none a range another held; two replicas that both wrote keep
// both; a child that left keeps its name, not its share.
func TestChildrenRecord(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	a := newChildren(client, "nestlet-system", "")
	require.NoError(t, a.load(ctx))
	a.setShare("west", podcidrs.Strings([]string{"10.128.3.0/24"}))
	a.add("north")
	require.NoError(t, a.save(ctx))

	b := newChildren(client, "nestlet-system", "")
	require.NoError(t, b.load(ctx))
	assert.Equal(t, "10.128.3.0/24", podcidrs.Format(b.share("west")))
	assert.True(t, b.known("north"))

	// Both replicas write: the second's save conflicts (the fake client
	// checks no resourceVersion: one conflict is made), it reads the
	// record again, and its next save keeps both.
	a.setShare("east", podcidrs.Strings([]string{"10.128.4.0/24"}))
	require.NoError(t, a.save(ctx))
	conflicts := 1
	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), api.ChildrenConfigMap, errors.New("changed"))
	})
	b.setShare("south", podcidrs.Strings([]string{"10.128.5.0/24"}))
	require.Error(t, b.save(ctx), "a conflict")
	assert.Equal(t, "10.128.4.0/24", podcidrs.Format(b.share("east")), "read again, merged")
	require.NoError(t, b.save(ctx))
	c := newChildren(client, "nestlet-system", "")
	require.NoError(t, c.load(ctx))
	assert.Equal(t, map[string][]netip.Prefix{
		"west": podcidrs.Strings([]string{"10.128.3.0/24"}), "north": nil,
		"east": podcidrs.Strings([]string{"10.128.4.0/24"}), "south": podcidrs.Strings([]string{"10.128.5.0/24"}),
	}, c.all())

	c.free("west")
	require.NoError(t, c.save(ctx))
	cm, err := client.CoreV1().ConfigMaps("nestlet-system").Get(ctx, api.ChildrenConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "", cm.Data["west"], "freed, still a child's name")
	assert.Contains(t, cm.Data, "west")
}

// The record holds the children's taint effect under a key no node name
// takes, for the admission policy, and the key is never read back as a
// child; an agent with another effect writes its own.
func TestChildrenRecordTaintEffect(t *testing.T) {
	client := fake.NewClientset()
	ctx := t.Context()
	a := newChildren(client, "nestlet-system", corev1.TaintEffectPreferNoSchedule)
	require.NoError(t, a.load(ctx))
	a.add("west")
	require.NoError(t, a.save(ctx))
	cm, err := client.CoreV1().ConfigMaps("nestlet-system").Get(ctx, api.ChildrenConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"west": "", api.ChildrenKeyTaintEffect: "PreferNoSchedule"}, cm.Data)

	b := newChildren(client, "nestlet-system", corev1.TaintEffectNoSchedule)
	require.NoError(t, b.load(ctx))
	assert.Equal(t, map[string][]netip.Prefix{"west": nil}, b.all(), "the key is no child")
	select {
	case <-b.dirty:
	default:
		t.Fatal("another effect than the record's: not marked to be saved")
	}
	require.NoError(t, b.save(ctx))
	cm, err = client.CoreV1().ConfigMaps("nestlet-system").Get(ctx, api.ChildrenConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "NoSchedule", cm.Data[api.ChildrenKeyTaintEffect])
}

// The children's FlowSchema names each known child's node identity once
// the record is saved, is left alone where the cluster has none, and gets
// its subjects back after something (an upgrade of the chart) reset them.
func TestChildrenFlowSchema(t *testing.T) {
	ctx := t.Context()
	a := newChildren(fake.NewClientset(), "nestlet-system", "")
	require.NoError(t, a.load(ctx))
	a.add("west")
	require.NoError(t, a.save(ctx), "no FlowSchema: nothing to keep")

	reset := []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: placeholder}}}
	client := fake.NewClientset(&flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: api.ChildrenFlowSchema},
		Spec: flowcontrolv1.FlowSchemaSpec{Rules: []flowcontrolv1.PolicyRulesWithSubjects{{Subjects: reset}}}})
	subjects := func() []string {
		fs, err := client.FlowcontrolV1().FlowSchemas().Get(ctx, api.ChildrenFlowSchema, metav1.GetOptions{})
		require.NoError(t, err)
		var out []string
		for _, s := range fs.Spec.Rules[0].Subjects {
			out = append(out, string(s.Kind)+":"+s.User.Name)
		}
		return out
	}
	b := newChildren(client, "nestlet-system", "")
	require.NoError(t, b.load(ctx))
	b.resyncFlow(ctx)
	assert.Equal(t, []string{"User:" + placeholder}, subjects(), "no child yet")
	b.add("west")
	b.setShare("east", podcidrs.Strings([]string{"10.128.4.0/24"}))
	require.NoError(t, b.save(ctx))
	assert.Equal(t, []string{"User:system:node:east", "User:system:node:west"}, subjects())

	fs, err := client.FlowcontrolV1().FlowSchemas().Get(ctx, api.ChildrenFlowSchema, metav1.GetOptions{})
	require.NoError(t, err)
	fs.Spec.Rules[0].Subjects = reset
	_, err = client.FlowcontrolV1().FlowSchemas().Update(ctx, fs, metav1.UpdateOptions{})
	require.NoError(t, err)
	b.resyncFlow(ctx)
	assert.Equal(t, []string{"User:system:node:east", "User:system:node:west"}, subjects(), "set again")

	b.free("east")
	require.NoError(t, b.save(ctx))
	assert.Equal(t, []string{"User:system:node:east", "User:system:node:west"}, subjects(), "a freed share is still a known child")
}
