package launcher

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// What a host lets in and out: its firewall (NAT as a home router has it)
// and what changes it at run time: joins admitting children, published
// ports, cuts, redirects to link proxies.

// firewall is the host's nftables ruleset: NAT as a home router has it.
// New connections from the WAN are dropped (so they time out, as behind a
// real NAT), except from the operator and from the host's children (the set
// "children", which Admit fills); nothing from the WAN is forwarded
// to its real nodes; whatever leaves by the WAN from behind the host (its
// pods) leaves with the host's address.
func (r *netHostRecord) firewall() string {
	return fmt.Sprintf(`table inet %[1]s {
	set children {
		type ipv4_addr
	}
	set cut {
		type ipv4_addr
	}
	set open_tcp {
		type inet_service
		flags interval
	}
	set open_udp {
		type inet_service
		flags interval
	}
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr @cut drop
		iifname != %[3]q accept
		ct state established,related accept
		ip saddr %[4]s accept
		ip saddr @children accept
		tcp dport @open_tcp accept
		udp dport @open_udp accept
		counter drop
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		ip saddr @cut drop
		ip daddr @cut drop
		iifname %[3]q ct status dnat ip saddr %[4]s accept
		iifname %[3]q ct status dnat ip saddr @children accept
		iifname %[3]q ct state new counter drop
	}
	chain output {
		type filter hook output priority filter; policy accept;
		ip daddr @cut drop
	}
}
table ip %[2]s {
	chain output {
		type nat hook output priority -100; policy accept;
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname %[3]q ip saddr != %[5]s masquerade
	}
}
`, hostTable, hostNATTable, hostWANIf, OperatorIP(), r.IP)
}

// Admit lets from's host open connections to h: a child to its parent (a
// join: the child dials its parent's API server and proxy), or, where an
// operator made a child reachable (a VPN, a public address), a parent to
// a child that serves its kubelet API directly.
func (h *Host) Admit(from *Host) error {
	return inNetns(h.Netns, nil, "nft", "add", "element", "inet", hostTable, "children", "{ "+from.IP+" }")
}

// Open lets every host of the WAN open connections (tcp) or flows (udp)
// to the ports first to last of h, as an operator publishes a service to
// the Internet (a parent's proxy serving its Services' node ports).
func (h *Host) Open(proto string, first, last uint16) error {
	return inNetns(h.Netns, nil, "nft", "add", "element", "inet", hostTable, "open_"+proto, fmt.Sprintf("{ %d-%d }", first, last))
}

// Cut drops every packet between h and other, both ways, connections
// open or new (a partition of the WAN between them: nothing is reset, as
// when a link goes down), until Heal.
func (h *Host) Cut(other *Host) error {
	return inNetns(h.Netns, nil, "nft", "add", "element", "inet", hostTable, "cut", "{ "+other.IP+" }")
}

// Heal undoes Cut.
func (h *Host) Heal(other *Host) error {
	err := inNetns(h.Netns, nil, "nft", "delete", "element", "inet", hostTable, "cut", "{ "+other.IP+" }")
	if err != nil && strings.Contains(err.Error(), "No such file or directory") {
		return nil // not cut
	}
	return err
}

// Redirect sends the connections h opens to each destination of routes (a
// parent's API server or nestlet-proxy) to its replacement instead (a link
// proxy on the operator's address, which carries them on to the
// destination and can delay and cut them), under the name name, until
// Unredirect(name).
func (h *Host) Redirect(name string, routes map[netip.AddrPort]netip.AddrPort) error {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n\tchain output {\n\t\ttype nat hook output priority -100; policy accept;\n", redirectTable(name))
	for dest, via := range routes {
		fmt.Fprintf(&b, "\t\tip daddr %s tcp dport %d dnat to %s\n", dest.Addr(), dest.Port(), via)
	}
	b.WriteString("\t}\n}\n")
	return inNetns(h.Netns, strings.NewReader(b.String()), "nft", "-f", "-")
}

// Unredirect undoes Redirect(name).
func (h *Host) Unredirect(name string) error { return h.deleteTable(redirectTable(name)) }

// deleteTable deletes the host's nftables table (ip family), if it is there.
func (h *Host) deleteTable(table string) error {
	err := inNetns(h.Netns, nil, "nft", "delete", "table", "ip", table)
	if err != nil && strings.Contains(err.Error(), "No such file or directory") {
		return nil
	}
	return err
}

func redirectTable(name string) string { return "nestlet_redirect_" + name }

// Publish is a load balancer in front of a cluster's node: connections to
// the host's WAN address on each port of ports are forwarded to its
// destination (a real node's NodePort), from the WAN as from the host
// itself (its API server dialing a kubelet endpoint), as a cloud's
// load balancer publishes a NodePort Service. The firewall still admits
// from the WAN only the operator and the host's children. Unpublish
// undoes it.
func (h *Host) Publish(name string, ports map[uint16]netip.AddrPort) error {
	return h.publish(name, "tcp", ports)
}

// PublishUDP is Publish for UDP ports (a gateway's WireGuard port, say).
func (h *Host) PublishUDP(name string, ports map[uint16]netip.AddrPort) error {
	return h.publish(name, "udp", ports)
}

func (h *Host) publish(name, proto string, ports map[uint16]netip.AddrPort) error {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n", publishTable(name))
	for _, chain := range []string{"prerouting priority dstnat", "output priority -100"} {
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype nat hook %s; policy accept;\n", strings.Fields(chain)[0], chain)
		for port, to := range ports {
			fmt.Fprintf(&b, "\t\tip daddr %s %s dport %d dnat to %s\n", h.IP, proto, port, to)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return inNetns(h.Netns, strings.NewReader(b.String()), "nft", "-f", "-")
}

// Unpublish undoes Publish(name).
func (h *Host) Unpublish(name string) error { return h.deleteTable(publishTable(name)) }

func publishTable(name string) string { return "nestlet_publish_" + name }

// SymmetricNAT puts (on) or takes away (off) a NAT in front of the host's
// gateway that maps each of its flows to another random port
// (symmetric, as carrier-grade NATs and some firewalls do): a peer that
// dials the host where a third host saw it come from reaches nothing.
// The gateway's flows start again under the new mapping (their
// connection tracking entries are forgotten).
func (h *Host) SymmetricNAT(on bool) error {
	if on {
		rules := fmt.Sprintf("table ip %s {\n\tchain postrouting {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n\t\toifname %q udp sport %d masquerade fully-random\n\t}\n}\n",
			symmetricTable, hostWANIf, GatewayPort)
		if err := inNetns(h.Netns, strings.NewReader(rules), "nft", "-f", "-"); err != nil {
			return err
		}
	} else if err := h.deleteTable(symmetricTable); err != nil {
		return err
	}
	return inNamespace(h.Netns, func() error {
		var errs []error
		for _, dir := range []netlink.ConntrackFilterType{netlink.ConntrackOrigSrcPort, netlink.ConntrackOrigDstPort} {
			f := &netlink.ConntrackFilter{}
			if err := f.AddProtocol(unix.IPPROTO_UDP); err != nil {
				return err
			}
			if err := f.AddPort(dir, GatewayPort); err != nil {
				return err
			}
			if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, f); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// symmetricTable is the nftables table (ip family) of SymmetricNAT.
const symmetricTable = "nestlet_symmetric_nat"
