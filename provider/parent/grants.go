package parent

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"go4.org/netipx"

	corev1 "k8s.io/api/core/v1"

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
//   - its share of the agent's pool (Config.PodCIDRPool), first come: a
//     range another child holds (its grant, or its share) is not given to
//     a second. A share only grows, by what the child claims that is free,
//     up to a share's size (the rest refused), and is held until the
//     child's node is gone (children.go): a claim that shrinks for a while
//     (a node cordoned, an agent restarting) loses nothing;
//   - never this cluster's own: its nodes' pod CIDRs and addresses, its
//     Service CIDRs, its API address on the pod network, and the API
//     addresses its parents' gateways relay (reserved).
//
// What is refused is said on the child's virtual node
// (api.AnnotationPodCIDRsRefused), which the child reports on its Target,
// and in a Warning event. A range held by another cluster that covers the
// same pods (the same cluster under another name, or a cluster below both
// in a diamond, as their summaries say) is routed through that one and not
// said to be refused. The same check runs at every level, so a
// grandchild's claim climbs no further than each parent on its way grants.

// DefaultPoolShareBits is Config.PodCIDRPoolShareBits' default: a child
// takes at most a /16 of IPv4 addresses from the pool (and as many /64s of
// IPv6), a cluster of 256 nodes of /24 each.
const DefaultPoolShareBits = 16

// errNotLoaded: the record of the children's shares has not been read yet.
var errNotLoaded = errors.New("the children's shares of the pod CIDR pool are not read yet")

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

// reserved is a set of addresses, and what they are.
type reserved struct {
	what string
	set  podcidrs.Set
}

// grants decides the children's claims (decide) and keeps the decisions
// for the summary this cluster reports up (routed).
type grants struct {
	admin *podcidrs.Grants
	pool  []netip.Prefix
	// share bounds a child's part of the pool, in IPv4 addresses and in
	// IPv6 /64s.
	share *big.Int
	kids  *children
	// own returns this cluster's reserved addresses, read when deciding.
	own func() []reserved

	mu      sync.Mutex
	decided map[string]decision
}

func newGrants(admin *podcidrs.Grants, pool []netip.Prefix, shareBits int, kids *children, own func() []reserved) *grants {
	if shareBits <= 0 {
		shareBits = DefaultPoolShareBits
	}
	return &grants{admin: admin, pool: pool, share: new(big.Int).Lsh(big.NewInt(1), uint(32-min(shareBits, 32))),
		kids: kids, own: own, decided: map[string]decision{}}
}

// maxRefusals is how many refused parts a description names, and
// maxRefusedPrefixes how many prefixes of each.
const (
	maxRefusals        = 5
	maxRefusedPrefixes = 4
)

// decide returns what child name is granted of claimed and records it for
// routed; a child taking from the pool holds what it is given (its share
// grows, saved in the background). through says whether another child
// covers the same pods as name (its ranges are then no refusal). It
// returns errNotLoaded until the children's shares were read.
func (g *grants) decide(name string, claimed []netip.Prefix, through func(other string) bool) (decision, error) {
	if !g.kids.isLoaded() {
		return decision{}, errNotLoaded
	}
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
	g.kids.add(name)
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
			part := left.Intersect(other.set)
			if through(other.child) {
				// Routed through the other: not this child's, and no
				// refusal either.
				left = left.Minus(part)
				continue
			}
			refuse(part, "held by "+other.what)
		}
	default:
		refuse(left, "this cluster grants "+name+" no pod CIDRs and has no pool: its admin grants them with nestctl grant "+name+" CIDR,... (or nestctl token create --pod-cidrs), or gives its agent a pool (--pod-cidr-pool)")
	}
	for _, r := range g.own() {
		refuse(left.Intersect(r.set), "this cluster's "+r.what)
	}
	if fromPool {
		left = g.takeShare(name, left, refuse)
	}
	d := decision{routed: left.Prefixes(), refused: api.PodCIDROverlapNone}
	if len(refusals) > maxRefusals {
		refusals = append(refusals[:maxRefusals], "and more")
	}
	if len(refusals) > 0 {
		d.refused = "not granted: " + strings.Join(refusals, "; ")
	}
	g.decided[name] = d
	return d, nil
}

// takeShare returns what child name is routed of free, the part of its
// claim the pool may give it: what its share holds already, and what more
// fits in a share, in address order (a prefix larger than what is left is
// split), which its share then holds too; the rest is refused. Called with
// mu held.
func (g *grants) takeShare(name string, free podcidrs.Set, refuse func(podcidrs.Set, string)) podcidrs.Set {
	held := podcidrs.SetOf(g.kids.share(name))
	left4, left6 := held.Size()
	left4.Sub(g.share, left4)
	left6.Sub(g.share, left6)
	var taken, over []netip.Prefix
	var take func(p netip.Prefix)
	take = func(p netip.Prefix) {
		left, size := left4, addresses(p)
		if !p.Addr().Is4() {
			left = left6
		}
		switch {
		case size.Cmp(left) <= 0:
			taken = append(taken, p)
			left.Sub(left, size)
		case left.Sign() > 0 && p.Bits() < p.Addr().BitLen():
			first := netip.PrefixFrom(p.Addr(), p.Bits()+1)
			take(first)
			take(netip.PrefixFrom(netipx.PrefixLastIP(first).Next(), p.Bits()+1))
		default:
			over = append(over, p)
		}
	}
	for _, p := range free.Minus(held).Prefixes() {
		take(p)
	}
	refuse(podcidrs.SetOf(over), fmt.Sprintf("beyond one child's share of this cluster's pool, %s addresses: its admin may grant it with nestctl grant %s CIDR,...", g.share, name))
	g.kids.setShare(name, held.Union(podcidrs.SetOf(taken)).Prefixes())
	return free.Intersect(held).Union(podcidrs.SetOf(taken))
}

// addresses is how many addresses p holds: IPv4 addresses, or IPv6 /64s
// (podcidrs.Set.Size).
func addresses(p netip.Prefix) *big.Int {
	v4, v6 := podcidrs.SetOf([]netip.Prefix{p}).Size()
	if p.Addr().Is4() {
		return v4
	}
	return v6
}

// holder is a range of another child's, and what it is.
type holder struct {
	child string
	reserved
}

// holders are the ranges of every child but name: what the admin granted
// it, or its share of the pool, in order. Called with mu held.
func (g *grants) holders(name string) []holder {
	var out []holder
	admin := g.admin.All()
	for child, grant := range admin {
		if child != name {
			out = append(out, holder{child, reserved{what: "cluster " + child + " (granted)", set: podcidrs.SetOf(grant)}})
		}
	}
	for child, share := range g.kids.all() {
		if _, granted := admin[child]; child != name && !granted && len(share) > 0 {
			out = append(out, holder{child, reserved{what: "cluster " + child, set: podcidrs.SetOf(share)}})
		}
	}
	slices.SortFunc(out, func(a, b holder) int { return strings.Compare(a.what, b.what) })
	return out
}

// forget drops child name's decision and frees its share of the pool (its
// virtual node is gone); the name stays a child's.
func (g *grants) forget(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.decided, name)
	g.kids.free(name)
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

// isChild reports whether n is a child's virtual node: it says so (its
// cluster label), it has the provider taint (which a node cannot take off
// itself), or its name is a known child's (children.go), whatever it says.
func isChild(n *corev1.Node, kids *children) bool {
	if n.Labels[api.LabelCluster] != "" || kids.known(n.Name) {
		return true
	}
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == api.TaintKeyProvider })
}
