package peers

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nestlet/nestlet/api"
)

// What a node sends into the tree. A pod's packets carry its pod IP, which
// the tree routes back; a node's own (a host-network pod, the kubelet's
// HTTP lifecycle hooks and probes, a node agent calling a pod of another
// cluster) carry the node's address, which no peer is routed: the next
// gateway drops them (WireGuard takes from a peer only the sources it is
// routed), and no answer could come back. So the gateway gives such
// packets, on their way into its interface, a source address of this
// cluster's own pod CIDRs, which the whole tree routes back here, where
// the kernel's connection tracking gives the answers back to the node: a
// source NAT (nftables table ip NodeSourceTable), to the first address of
// the first pod CIDR of this cluster's own nodes. Packets from any address
// the peers carry (pods here, below or elsewhere, the API relays) keep
// their source. A cluster with no node of its own (every node a child's)
// has nothing to translate.

// NodeSourceTable is the gateway's nftables table (family ip).
const NodeSourceTable = "nestlet_gateway"

// nodeSourcePriority runs before the route agents' chain (table ip
// nestlet, source NAT - 1) on a gateway node that also runs one, which
// would bind the node's address for good.
var nodeSourcePriority = *nftables.ChainPriorityNATSource - 2

// nodeSource keeps the table of one gateway interface.
type nodeSource struct {
	iface string
	conn  func() (*nftables.Conn, error)

	mu   sync.Mutex
	last *nodeSourcePlan
}

// nodeSourcePlan is what the table says: packets into the interface from
// outside keep are given the source to.
type nodeSourcePlan struct {
	keep []netip.Prefix
	to   netip.Addr
}

// planNodeSource returns the plan for a cluster whose own nodes have the
// pod CIDRs own and whose peers carry keep; ok false when there is nothing
// to translate (no IPv4 pod CIDR of its own).
func planNodeSource(own, keep []netip.Prefix) (nodeSourcePlan, bool) {
	own = slices.Clone(own)
	slices.SortFunc(own, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for _, p := range own {
		if !p.Addr().Is4() || p.Bits() > 30 {
			continue
		}
		to := p.Masked().Addr().Next()
		keep = append(slices.Clone(keep), own...)
		slices.SortFunc(keep, func(a, b netip.Prefix) int {
			if c := a.Addr().Compare(b.Addr()); c != 0 {
				return c
			}
			return a.Bits() - b.Bits()
		})
		return nodeSourcePlan{keep: slices.Compact(keep), to: to}, true
	}
	return nodeSourcePlan{}, false
}

// set makes the table what plan says (none when !ok), unless it already is.
func (n *nodeSource) set(plan nodeSourcePlan, ok bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var want *nodeSourcePlan
	if ok {
		want = &plan
	}
	if (want == nil && n.last == nil) || (want != nil && n.last != nil && want.to == n.last.to && slices.Equal(want.keep, n.last.keep)) {
		return nil
	}
	c, err := n.conn()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: NodeSourceTable}
	// Add, delete and add again: the old table goes in the same
	// transaction as the new one comes.
	c.AddTable(table)
	c.DelTable(table)
	if want != nil {
		c.AddTable(table)
		chain := c.AddChain(&nftables.Chain{Name: "postrouting", Table: table, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: &nodeSourcePriority})
		iface := ifname(n.iface)
		toIface := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: iface},
		}
		for _, p := range want.keep {
			if !p.Addr().Is4() {
				continue
			}
			mask := net.CIDRMask(p.Bits(), 32)
			addr := p.Masked().Addr().As4()
			// oifname iface ip saddr & mask == prefix accept
			c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: slices.Concat(toIface, []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:]},
				&expr.Verdict{Kind: expr.VerdictAccept},
			})})
		}
		to := want.to.As4()
		// oifname iface snat to <to>
		c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: slices.Concat(toIface, []expr.Any{
			&expr.Counter{}, // what was translated: nft list table ip nestlet_gateway
			&expr.Immediate{Register: 1, Data: to[:]},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 1},
		})})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table %s (the nodes' own packets into the tree): %w", NodeSourceTable, err)
	}
	n.last = want
	return nil
}

// ifname is an interface name as nftables compares it (NUL-padded).
func ifname(s string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, s)
	return b
}

// ownPodCIDRs are the pod CIDRs of this cluster's own nodes (not its
// children's virtual nodes).
func (t *Peers) ownPodCIDRs() []netip.Prefix {
	var out []netip.Prefix
	if nodes, err := t.nodes.List(labels.Everything()); err == nil {
		for _, n := range nodes {
			if n.Labels[api.LabelCluster] == "" {
				out = append(out, prefixes(nodePodCIDRs(n))...)
			}
		}
	}
	return out
}

// sourcesKept are the sources a packet into the tree keeps (nodesource.go):
// every CIDR the peers are routed, and the API relays', this cluster's and
// its parents'.
func (t *Peers) sourcesKept(claimed map[netip.Prefix]bool) []netip.Prefix {
	out := prefixes(t.apiPrefix())
	for p := range claimed {
		out = append(out, p)
	}
	for _, p := range t.parentAPI {
		out = append(out, p)
	}
	return out
}
