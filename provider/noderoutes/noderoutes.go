// Package noderoutes carries the traffic of a cluster's other nodes to the
// node its gateway runs on, so that every pod of the cluster, not only
// those of the gateway's node, reaches the rest of the tree.
//
// The gateway (provider/gateway, run by the agent on its node's network)
// routes the tree's other pod CIDRs to its peers on its own node only.
// The working agent publishes which node that is and those CIDRs in the
// ConfigMap nestlet-gateway of its namespace (ConfigMapName); a route agent
// on every node (cmd/nestlet-routes, the chart's DaemonSet) reads it:
//
//   - on another node, it holds a VXLAN interface (Device) whose remote end
//     is the gateway's node and routes the published CIDRs into it, through
//     a next hop (HubIP) whose address is never held by any node, with a
//     permanent neighbour entry to the gateway node's interface (HubMAC);
//   - on the gateway's node, it holds the receiving end: a VXLAN interface
//     with that MAC, from which the kernel forwards the packets into the
//     gateway's peers.
//
// VXLAN and not routes to the gateway's node address: the nodes need not
// share a link (a routed network, or a cloud's that forwards only the
// addresses it assigned), as Submariner's route agent does it. The answers
// come back on the cluster's own pod network (the gateway's node reaches
// every pod of its cluster), so the path is asymmetric: the route agent
// sets reverse path filtering to loose where it is strict.
//
// Pods keep their addresses: on every node, the route agent gives new
// connections to the published CIDRs a source NAT to their own address
// (nat.go), which keeps a network plugin's masquerade in netfilter from
// applying to them. The same table drops VXLAN packets from any address
// that is not a node's of the cluster (Plan.Peers), and those a node would
// forward to another node's VXLAN port: they come from its pods, and a
// network plugin's masquerade would give them the node's address.
package noderoutes

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

const (
	// ConfigMapName is the ConfigMap, in the agent's namespace, where the
	// working agent publishes its gateway's node (KeyNode) and the CIDRs
	// routed to the peers (KeyRoutes).
	ConfigMapName = "nestlet-gateway"
	// KeyNode is the name of the node the gateway runs on.
	KeyNode = "node"
	// KeyRoutes are the CIDRs the gateway routes to its peers,
	// comma-separated.
	KeyRoutes = "routes"

	// Device is the VXLAN interface on every node.
	Device = "nestlet-vx"
	// DefaultPort is the VXLAN UDP port (not 4789 nor 8472, which network
	// plugins take for their own VXLAN).
	DefaultPort = 4799
	// DefaultVNI is the VXLAN network identifier.
	DefaultVNI = 7749
	// overhead is VXLAN's on IPv4: outer IP, UDP, VXLAN, inner Ethernet.
	overhead = 50
)

var (
	// HubMAC is the gateway node's VXLAN interface's hardware address, the
	// same in every cluster: the other nodes need not learn it.
	HubMAC = net.HardwareAddr{0x02, 0x6e, 0x73, 0x74, 0x6c, 0x01}
	// HubIP is the next hop of the other nodes' routes: link-local, held by
	// no interface (the neighbour entry resolves it to HubMAC).
	HubIP = netip.MustParseAddr("169.254.77.1")
)

// Role is what a node is to the gateway.
type Role int

const (
	// RoleNone: no gateway published.
	RoleNone Role = iota
	// RoleHub: the gateway runs on this node.
	RoleHub
	// RoleSpoke: the gateway runs on another node, at Plan.Gateway.
	RoleSpoke
)

func (r Role) String() string {
	return [...]string{"none", "gateway", "other"}[r]
}

// Plan is what a node's route agent configures.
type Plan struct {
	Role Role
	// GatewayNode and Gateway are the gateway's node and its address.
	GatewayNode string
	Gateway     netip.Addr
	// Routes go to the gateway (RoleSpoke).
	Routes []netip.Prefix
	// Peers are the addresses VXLAN packets are accepted from: the
	// cluster's nodes' (NodeAddresses). Any other source's are dropped,
	// so that no host or pod that can reach the node's VXLAN port sends
	// packets into the tree through it. Nil: accepted from anywhere.
	Peers []netip.Addr
}

// Data is the ConfigMap's data for a gateway on node routing routes.
func Data(node string, routes []netip.Prefix) map[string]string {
	s := make([]string, len(routes))
	for i, r := range routes {
		s[i] = r.String()
	}
	slices.Sort(s)
	return map[string]string{KeyNode: node, KeyRoutes: strings.Join(s, ",")}
}

// PlanFor is the plan of node self given the published ConfigMap (nil: none)
// and a lookup of nodes by name. An error says what is wrong with what was
// published; the node then keeps no route.
func PlanFor(cm *corev1.ConfigMap, self string, node func(string) (*corev1.Node, error)) (Plan, error) {
	if cm == nil || cm.Data[KeyNode] == "" {
		return Plan{}, nil
	}
	p := Plan{GatewayNode: cm.Data[KeyNode]}
	for _, s := range strings.Split(cm.Data[KeyRoutes], ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		r, err := netip.ParsePrefix(s)
		if err != nil {
			return Plan{}, fmt.Errorf("ConfigMap %s: route %q: %w", ConfigMapName, s, err)
		}
		if !r.Addr().Is4() {
			continue // VXLAN here carries IPv4 only
		}
		p.Routes = append(p.Routes, r.Masked())
	}
	if p.GatewayNode == self {
		p.Role = RoleHub
		return p, nil
	}
	// A gateway that routes nothing (yet: its agent has just started) is
	// still the remote end: the interface stays, with no route, and an
	// agent's restart does not make it again.
	n, err := node(p.GatewayNode)
	if err != nil {
		return Plan{}, fmt.Errorf("the gateway's node %s: %w", p.GatewayNode, err)
	}
	if p.Gateway = InternalIP(n); !p.Gateway.IsValid() {
		return Plan{}, fmt.Errorf("the gateway's node %s has no IPv4 InternalIP", p.GatewayNode)
	}
	p.Role = RoleSpoke
	return p, nil
}

// NodeAddresses are the IPv4 addresses (InternalIP and ExternalIP) of
// nodes, sorted, each once: where the nodes' VXLAN packets come from.
func NodeAddresses(nodes []*corev1.Node) []netip.Addr {
	out := []netip.Addr{}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() && !slices.Contains(out, ip) {
				out = append(out, ip)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// InternalIP is the node's first IPv4 InternalIP (invalid: none).
func InternalIP(n *corev1.Node) netip.Addr {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
			return ip
		}
	}
	return netip.Addr{}
}
