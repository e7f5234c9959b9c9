package parent

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
)

// A child's addresses are the parent's to grant, as node IPAM grants a
// node its pod CIDR. A child's summary claims pod CIDRs; the parent routes
// to it, carries up in its own summary and tells its other children only
// the part of the claim it grants:
//
//   - what the parent's admin granted the child (api.PodCIDRGrantsConfigMap,
//     `nestctl grant`), or, for a child with no grant there,
//   - a share of the agent's pool (Config.PodCIDRPool), first come: a
//     range another child holds (its grant, or its share of the pool,
//     persisted in api.PodCIDRAllocationsConfigMap) is not given to a
//     second, and a claim larger than one share is refused whole;
//   - never this cluster's own: its nodes' pod CIDRs and addresses, its
//     Service CIDRs, its API address on the pod network (reserved).
//
// What is refused is said on the child's virtual node
// (api.AnnotationPodCIDRsRefused), which the child reports on its Target,
// and in a Warning event. The same check runs at every level, so a
// grandchild's claim climbs no further than its parent granted it.

// DefaultPoolShareBits is Config.PodCIDRPoolShareBits' default: a child
// takes at most a /16 of IPv4 addresses from the pool (and as many /64s of
// IPv6), a cluster of 256 nodes of /24 each.
const DefaultPoolShareBits = 16

// decision is what the parent grants one child of what it claims.
type decision struct {
	// routed is the part of the claim the child is routed, in order.
	routed []netip.Prefix
	// refused is api.PodCIDROverlapNone when nothing of the claim is
	// refused, else which parts are and why.
	refused string
}

// routedStrings is routed as CIDR strings.
func (d decision) routedStrings() []string {
	out := make([]string, len(d.routed))
	for i, p := range d.routed {
		out[i] = p.String()
	}
	return out
}

// reserved is a set of this cluster's own addresses, and what it is.
type reserved struct {
	what string
	set  podcidrs.Set
}

// grants decides the children's claims (decide) and keeps the decisions
// for the summary this cluster reports up (routed).
type grants struct {
	admin *podcidrs.Grants
	pool  []netip.Prefix
	// share bounds a child's part of the pool, in IPv4 addresses and
	// IPv6 /64s.
	share *big.Int
	held  *allocations
	// own returns this cluster's reserved addresses, read when deciding.
	own func() []reserved

	mu      sync.Mutex
	decided map[string]decision
}

func newGrants(admin *podcidrs.Grants, pool []netip.Prefix, shareBits int, held *allocations, own func() []reserved) *grants {
	if shareBits <= 0 {
		shareBits = DefaultPoolShareBits
	}
	return &grants{admin: admin, pool: pool, share: new(big.Int).Lsh(big.NewInt(1), uint(32-min(shareBits, 32))),
		held: held, own: own, decided: map[string]decision{}}
}

// maxRefusals is how many refused parts a description names, and
// maxRefusedPrefixes how many prefixes of each.
const (
	maxRefusals        = 5
	maxRefusedPrefixes = 4
)

// decide returns what child name is granted of claimed, records it for
// routed, and holds the child's share of the pool (saved before it
// returns: a share that cannot be saved is not given).
func (g *grants) decide(ctx context.Context, name string, claimed []netip.Prefix) (decision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	left := podcidrs.SetOf(claimed)
	var refusals []string
	refuse := func(part podcidrs.Set, why string) {
		if part.Empty() {
			return
		}
		ps := part.Prefixes()
		listed := podcidrs.Format(ps[:min(len(ps), maxRefusedPrefixes)])
		if len(ps) > maxRefusedPrefixes {
			listed += fmt.Sprintf(" and %d more", len(ps)-maxRefusedPrefixes)
		}
		refusals = append(refusals, fmt.Sprintf("%s (%s)", listed, why))
		left = left.Minus(part)
	}
	grant, explicit, err := g.admin.Of(name)
	fromPool := false
	switch {
	case err != nil:
		refuse(left, "the grant does not parse, so nothing is granted: "+err.Error())
	case explicit:
		refuse(left.Minus(podcidrs.SetOf(grant)), "outside what this cluster grants "+name+": "+podcidrs.Format(grant)+"; its admin may grant more with nestctl grant "+name+" CIDR,...")
	case len(g.pool) > 0:
		fromPool = true
		refuse(left.Minus(podcidrs.SetOf(g.pool)), "outside this cluster's pool "+podcidrs.Format(g.pool)+" and not granted to "+name+": its admin may grant it with nestctl grant "+name+" CIDR,...")
		for _, other := range g.holders(name) {
			refuse(left.Intersect(other.set), "held by "+other.what)
		}
	default:
		refuse(left, "this cluster grants "+name+" no pod CIDRs and has no pool: its admin grants them with nestctl grant "+name+" CIDR,... (or nestctl token create --pod-cidrs), or gives its agent a pool (--pod-cidr-pool)")
	}
	for _, r := range g.own() {
		refuse(left.Intersect(r.set), "this cluster's "+r.what)
	}
	if fromPool {
		if v4, v6 := left.Size(); v4.Cmp(g.share) > 0 || v6.Cmp(g.share) > 0 {
			refuse(left, fmt.Sprintf("more than one child's share of this cluster's pool, %s addresses: its admin may grant it with nestctl grant %s CIDR,...", g.share, name))
		}
	}
	d := decision{routed: left.Prefixes(), refused: api.PodCIDROverlapNone}
	if len(refusals) > maxRefusals {
		refusals = append(refusals[:maxRefusals], "and more")
	}
	if len(refusals) > 0 {
		d.refused = "not granted: " + strings.Join(refusals, "; ")
	}
	var share []netip.Prefix
	if fromPool {
		share = d.routed
	}
	if err := g.held.set(ctx, name, share); err != nil {
		return decision{}, err
	}
	g.decided[name] = d
	return d, nil
}

// holders are the ranges of every child but name: what the admin granted
// it, or its share of the pool. Called with mu held.
func (g *grants) holders(name string) []reserved {
	var out []reserved
	admin := g.admin.All()
	for _, child := range slices.Sorted(func(yield func(string) bool) {
		for k := range admin {
			if !yield(k) {
				return
			}
		}
	}) {
		if child != name {
			out = append(out, reserved{what: "cluster " + child + " (granted)", set: podcidrs.SetOf(admin[child])})
		}
	}
	for child, share := range g.held.all() {
		if _, granted := admin[child]; child != name && !granted {
			out = append(out, reserved{what: "cluster " + child, set: podcidrs.SetOf(share)})
		}
	}
	slices.SortFunc(out, func(a, b reserved) int { return strings.Compare(a.what, b.what) })
	return out
}

// forget drops child name's decision and frees its share of the pool (its
// virtual node is gone).
func (g *grants) forget(ctx context.Context, name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.decided, name)
	return g.held.set(ctx, name, nil)
}

// routed returns the pod CIDRs child name is granted, and false while it
// has not been decided (then nothing of it is carried up).
func (g *grants) routed(name string) ([]string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d, ok := g.decided[name]
	if !ok {
		return nil, false
	}
	return d.routedStrings(), true
}

// allocations are the children's shares of the pool, kept in a ConfigMap of
// the agent's namespace (api.PodCIDRAllocationsConfigMap) so that a
// restarted agent gives no child a range another holds.
type allocations struct {
	client    kubernetes.Interface
	namespace string

	mu     sync.Mutex
	shares map[string][]netip.Prefix
}

func newAllocations(client kubernetes.Interface, namespace string) *allocations {
	return &allocations{client: client, namespace: namespace, shares: map[string][]netip.Prefix{}}
}

// load reads the shares saved, keeping only those of children for which
// exists says yes.
func (a *allocations) load(ctx context.Context, exists func(child string) bool) error {
	cm, err := a.client.CoreV1().ConfigMaps(a.namespace).Get(ctx, api.PodCIDRAllocationsConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the children's shares of the pod CIDR pool (configmap %s/%s): %w", a.namespace, api.PodCIDRAllocationsConfigMap, err)
	}
	shares := map[string][]netip.Prefix{}
	for child, v := range cm.Data {
		if ps, err := podcidrs.Parse(v); err == nil && exists(child) {
			shares[child] = ps
		}
	}
	a.mu.Lock()
	a.shares = shares
	a.mu.Unlock()
	return nil
}

// all returns every child's share.
func (a *allocations) all() map[string][]netip.Prefix {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string][]netip.Prefix, len(a.shares))
	for k, v := range a.shares {
		out[k] = v
	}
	return out
}

// set makes share child's share of the pool (none: freed) and saves the
// shares when they changed.
func (a *allocations) set(ctx context.Context, child string, share []netip.Prefix) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.Equal(a.shares[child], share) {
		return nil
	}
	next := make(map[string][]netip.Prefix, len(a.shares)+1)
	for k, v := range a.shares {
		next[k] = v
	}
	if len(share) == 0 {
		delete(next, child)
	} else {
		next[child] = share
	}
	if err := a.save(ctx, next); err != nil {
		return err
	}
	a.shares = next
	return nil
}

// save writes shares as the ConfigMap's data.
func (a *allocations) save(ctx context.Context, shares map[string][]netip.Prefix) error {
	if a.client == nil {
		return nil
	}
	data := make(map[string]string, len(shares))
	for k, v := range shares {
		data[k] = podcidrs.Format(v)
	}
	cms := a.client.CoreV1().ConfigMaps(a.namespace)
	cm, err := cms.Get(ctx, api.PodCIDRAllocationsConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.PodCIDRAllocationsConfigMap, Namespace: a.namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "nestlet"}}, Data: data}, metav1.CreateOptions{FieldManager: api.FieldManager})
	case err == nil:
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: api.FieldManager})
	}
	if err != nil {
		return fmt.Errorf("saving the children's shares of the pod CIDR pool (configmap %s/%s): %w", a.namespace, api.PodCIDRAllocationsConfigMap, err)
	}
	return nil
}
