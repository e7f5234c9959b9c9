package noderoutes

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// NATTable is the nftables table (family ip) that keeps the source address
// of what leaves for the rest of the tree.
const NATTable = "nestlet"

// natPriority runs the chain just before source NAT (100), where network
// plugins and kube-proxy masquerade (iptables' nat table, or nftables
// chains at srcnat).
var natPriority = *nftables.ChainPriorityNATSource - 1

// keepSources makes the packets of a new connection to any of routes keep
// their source address: a source NAT to the packet's own source (a "null
// binding"). Once a connection has a binding, the kernel runs no later NAT
// chain for it, so a network plugin's masquerade of traffic leaving the
// cluster is skipped for the tree's pod CIDRs, and the server in another
// cluster sees the client pod's own address (an accept would not do: the
// next NAT chain would still run). No routes: the table is removed. The
// table is replaced whole, in one transaction.
func keepSources(c *nftables.Conn, routes []netip.Prefix) error {
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: NATTable}
	// Add, delete and add again: the old table goes whether or not it
	// was there, in the same transaction as the new one comes.
	c.AddTable(table)
	c.DelTable(table)
	if len(routes) == 0 {
		if err := c.Flush(); err != nil {
			return fmt.Errorf("removing the nftables table %s: %w", NATTable, err)
		}
		return nil
	}
	c.AddTable(table)
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
	if err := c.Flush(); err != nil {
		return fmt.Errorf("keeping the pods' source addresses to the tree (nftables table %s): %w", NATTable, err)
	}
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
