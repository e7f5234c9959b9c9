package noderoutes

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// NATTable is the nftables table (family ip) that keeps the source address
// of what leaves for the rest of the tree, and accepts VXLAN from the
// cluster's nodes only (and not from their pods).
const NATTable = "nestlet"

// natPriority runs the chain just before source NAT (100), where network
// plugins and kube-proxy masquerade (iptables' nat table, or nftables
// chains at srcnat).
var natPriority = *nftables.ChainPriorityNATSource - 1

// setTable makes the namespace's nftables table that of p, replaced whole
// in one transaction (no table when p needs none):
//
//   - the packets of a new connection to any of p.Routes keep their source
//     address: a source NAT to the packet's own source (a "null binding").
//     Once a connection has a binding, the kernel runs no later NAT chain
//     for it, so a network plugin's masquerade of traffic leaving the
//     cluster is skipped for the tree's pod CIDRs, and the server in
//     another cluster sees the client pod's own address (an accept would
//     not do: the next NAT chain would still run);
//   - with p.Peers (not nil) and a role, UDP packets to the VXLAN port from
//     any other address are dropped on their way in: only the cluster's
//     nodes send into the VXLAN. A drop in any table is final;
//   - with them too, the node forwards no UDP packet to the VXLAN port of
//     a node's address: what it forwards there comes from a pod (the
//     node's own VXLAN packets are its own output, not forwarded), which a
//     network plugin's masquerade would give the node's address, and the
//     gateway's node would take for the node's.
func setTable(c *nftables.Conn, p Plan, port int) error {
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: NATTable}
	// Add, delete and add again: the old table goes whether or not it
	// was there, in the same transaction as the new one comes.
	c.AddTable(table)
	c.DelTable(table)
	filter := p.Peers != nil && p.Role != RoleNone
	if len(p.Routes) == 0 && !filter {
		if err := c.Flush(); err != nil {
			return fmt.Errorf("removing the nftables table %s: %w", NATTable, err)
		}
		return nil
	}
	c.AddTable(table)
	if len(p.Routes) > 0 {
		keepSources(c, table, p.Routes)
	}
	if filter {
		if err := vxlanFromPeers(c, table, p.Peers, port); err != nil {
			return err
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table %s (the pods' source addresses to the tree, VXLAN from the nodes only): %w", NATTable, err)
	}
	return nil
}

// keepSources adds the postrouting chain of setTable.
func keepSources(c *nftables.Conn, table *nftables.Table, routes []netip.Prefix) {
	chain := c.AddChain(&nftables.Chain{Name: "postrouting", Table: table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: &natPriority})
	for _, r := range routes {
		if !r.Addr().Is4() {
			continue
		}
		mask := netipMask(r.Bits())
		addr := r.Masked().Addr().As4()
		c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
			// ip daddr & mask == prefix
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask[:], Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:]},
			// snat to ip saddr
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 1},
		}})
	}
}

// PeersSet is the set, in the table, of the addresses VXLAN packets are
// accepted from.
const PeersSet = "nodes"

// vxlanFromPeers adds the input and forward chains of setTable.
func vxlanFromPeers(c *nftables.Conn, table *nftables.Table, peers []netip.Addr, port int) error {
	set := &nftables.Set{Table: table, Name: PeersSet, KeyType: nftables.TypeIPAddr}
	elements := make([]nftables.SetElement, 0, len(peers))
	for _, a := range peers {
		if a.Is4() {
			elements = append(elements, nftables.SetElement{Key: a.AsSlice()})
		}
	}
	if err := c.AddSet(set, elements); err != nil {
		return fmt.Errorf("the nodes' addresses (nftables set %s): %w", PeersSet, err)
	}
	toPort := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(uint16(port))},
	}
	drop := []expr.Any{
		&expr.Counter{}, // what was dropped: nft list table ip nestlet
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
	// input: udp dport port ip saddr != @nodes drop
	input := c.AddChain(&nftables.Chain{Name: "input", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: table, Chain: input, Exprs: slices.Concat(toPort, []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: true},
	}, drop)})
	// forward: udp dport port ip daddr @nodes drop
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: table, Chain: forward, Exprs: slices.Concat(toPort, []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
	}, drop)})
	return nil
}

// netipMask is the IPv4 mask of bits ones.
func netipMask(bits int) [4]byte {
	var m [4]byte
	for i := range bits {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}
