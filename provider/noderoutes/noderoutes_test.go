package noderoutes

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPlanFor(t *testing.T) {
	nodes := map[string]*corev1.Node{
		"gw": {Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: "gw"}, {Type: corev1.NodeInternalIP, Address: "fd00::1"},
			{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}},
		"bare": {},
	}
	lookup := func(name string) (*corev1.Node, error) {
		if n, ok := nodes[name]; ok {
			return n, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	cm := func(node, routes string) *corev1.ConfigMap {
		return &corev1.ConfigMap{Data: map[string]string{KeyNode: node, KeyRoutes: routes}}
	}
	routes := []netip.Prefix{netip.MustParsePrefix("10.3.0.0/16"), netip.MustParsePrefix("10.251.0.1/32")}
	require.Equal(t, cm("gw", "10.251.0.1/32,10.3.0.0/16").Data, Data("gw", routes), "published in order")

	p, err := PlanFor(nil, "a", lookup)
	require.NoError(t, err)
	require.Equal(t, RoleNone, p.Role, "nothing published")
	p, err = PlanFor(cm("gw", ""), "a", lookup)
	require.NoError(t, err)
	require.Equal(t, Plan{Role: RoleSpoke, GatewayNode: "gw", Gateway: netip.MustParseAddr("10.0.0.1")}, p,
		"a gateway that routes nothing yet (its agent just started): the interface, no route")
	p, err = PlanFor(cm("gw", ""), "gw", lookup)
	require.NoError(t, err)
	require.Equal(t, RoleHub, p.Role, "the gateway's node receives even before there are routes")

	p, err = PlanFor(cm("gw", "10.3.1.7/16, fd00:1::/64,10.251.0.1/32"), "a", lookup)
	require.NoError(t, err)
	require.Equal(t, Plan{Role: RoleSpoke, GatewayNode: "gw", Gateway: netip.MustParseAddr("10.0.0.1"),
		Routes: []netip.Prefix{netip.MustParsePrefix("10.3.0.0/16"), netip.MustParsePrefix("10.251.0.1/32")}}, p,
		"IPv4 routes, masked, to the node's IPv4 InternalIP")

	require.Equal(t, []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("192.0.2.7")},
		NodeAddresses([]*corev1.Node{nodes["gw"], nodes["bare"], {Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeExternalIP, Address: "192.0.2.7"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
			{Type: corev1.NodeInternalDNS, Address: "10.0.0.9"}}}}}),
		"every node's IPv4 InternalIP and ExternalIP, sorted, each once")

	_, err = PlanFor(cm("gw", "10.3.0.0/33"), "a", lookup)
	require.ErrorContains(t, err, `route "10.3.0.0/33"`)
	_, err = PlanFor(cm("gone", "10.3.0.0/16"), "a", lookup)
	require.ErrorContains(t, err, "the gateway's node gone")
	_, err = PlanFor(cm("bare", "10.3.0.0/16"), "a", lookup)
	require.ErrorContains(t, err, "no IPv4 InternalIP")
}

// Three network namespaces: a node ("spoke"), the gateway's node ("hub")
// on the same link, and behind the hub another cluster's pod ("remote",
// 10.99.0.1, standing for what the tunnels reach). The spoke has no route
// to the remote but its link: before the plan its packets cannot leave;
// with it they reach the remote through the VXLAN, the hub forwarding them
// as the gateway's node forwards them into the tunnels; the answers come
// back on the link. The plans apply again without change, drop a route
// no longer published, and go away with the role.
func TestApplyCarriesANodesPodsToTheGateway(t *testing.T) {
	spoke, hub := threeNamespaces(t)
	_, err := exchange(t, spoke, "10.99.0.1:7")
	require.ErrorContains(t, err, "network is unreachable", "the spoke reaches the remote without a plan")

	spokeA, hubA := applier(t, spoke), applier(t, hub)
	routes := []netip.Prefix{netip.MustParsePrefix("10.99.0.0/24"), netip.MustParsePrefix("10.98.0.0/16")}
	plan := Plan{Role: RoleSpoke, GatewayNode: "hub", Gateway: netip.MustParseAddr("10.200.0.1"), Routes: routes}
	_, err = spokeA.Apply(plan)
	require.NoError(t, err)
	_, err = hubA.Apply(Plan{Role: RoleHub, GatewayNode: "hub"})
	require.NoError(t, err)

	answer, err := exchange(t, spoke, "10.99.0.1:7")
	require.NoError(t, err, "the spoke does not reach the remote through the VXLAN")
	require.True(t, strings.HasPrefix(answer, "10.200.0.2:"), "the remote sees %s, not the spoke's own address", answer)
	hubLink, err := hubA.Handle.LinkByName(Device)
	require.NoError(t, err)
	require.NotZero(t, hubLink.Attrs().Statistics.RxPackets, "the packet did not arrive on the hub's VXLAN")
	require.Equal(t, HubMAC.String(), hubLink.Attrs().HardwareAddr.String())

	before, err := spokeA.Handle.LinkByName(Device)
	require.NoError(t, err)
	plan.Routes = routes[:1]
	_, err = spokeA.Apply(plan)
	require.NoError(t, err)
	after, err := spokeA.Handle.LinkByName(Device)
	require.NoError(t, err)
	require.Equal(t, before.Attrs().Index, after.Attrs().Index, "the interface was made again for the same gateway")
	have, err := spokeA.Handle.RouteList(after, netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, have, 1, "the route no longer published is still there: %v", have)
	require.Equal(t, "10.99.0.0/24", have[0].Dst.String())
	_, err = exchange(t, spoke, "10.99.0.1:7")
	require.NoError(t, err)

	// The gateway moves to the spoke: it now receives, and routes nothing.
	_, err = spokeA.Apply(Plan{Role: RoleHub, GatewayNode: "spoke"})
	require.NoError(t, err)
	_, err = exchange(t, spoke, "10.99.0.1:7")
	require.ErrorContains(t, err, "network is unreachable")
	l, err := spokeA.Handle.LinkByName(Device)
	require.NoError(t, err)
	require.Equal(t, HubMAC.String(), l.Attrs().HardwareAddr.String())

	_, err = spokeA.Apply(Plan{})
	require.NoError(t, err)
	_, err = spokeA.Handle.LinkByName(Device)
	require.Error(t, err, "the interface is left without a gateway")
	require.NoError(t, spokeA.Remove(), "removing what is not there")
}

// A network plugin that masquerades what leaves the node (here a source
// NAT of everything to 10.200.0.9, as a plugin's chain at srcnat does) would
// hide the pod's address from the other cluster: the route agent's null
// binding keeps it for the tree's CIDRs, and goes with the plan.
func TestApplyKeepsSourcesFromAPluginsMasquerade(t *testing.T) {
	spoke, hub := threeNamespaces(t)
	ip(t, "-n", spoke, "addr", "add", "10.200.0.9/24", "dev", "to-"+hub[:5])
	spokeNAT := pluginMasquerade(t, spoke, [4]byte{10, 200, 0, 9})

	plan := Plan{Role: RoleSpoke, GatewayNode: "hub", Gateway: netip.MustParseAddr("10.200.0.1"),
		Routes: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/24")}}
	_, err := applier(t, hub).Apply(Plan{Role: RoleHub, GatewayNode: "hub"})
	require.NoError(t, err)
	without := applier(t, spoke)
	_, err = without.Apply(plan)
	require.NoError(t, err)
	answer, err := exchange(t, spoke, "10.99.0.1:7")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(answer, "10.200.0.9:"), "the plugin's NAT did not apply (the control): the remote sees %s", answer)

	with := applier(t, spoke)
	with.NAT = nftConn(t, spoke)
	_, err = with.Apply(plan)
	require.NoError(t, err)
	answer, err = exchange(t, spoke, "10.99.0.1:7")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(answer, "10.200.0.2:"), "the remote sees %s, not the sender's own address", answer)
	_, err = with.Apply(plan)
	require.NoError(t, err, "applied again")

	_, err = with.Apply(Plan{})
	require.NoError(t, err)
	tables, err := spokeNAT.ListTablesOfFamily(nftables.TableFamilyIPv4)
	require.NoError(t, err)
	for _, tb := range tables {
		require.NotEqual(t, NATTable, tb.Name, "the table stays without a plan")
	}
}

// pluginMasquerade gives namespace ns a network plugin's masquerade: a
// source NAT of everything leaving to addr, in a table of its own at
// srcnat. It returns the namespace's nftables connection.
func pluginMasquerade(t *testing.T, ns string, addr [4]byte) *nftables.Conn {
	c := nftConn(t, ns)
	plugin := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "plugin"})
	chain := c.AddChain(&nftables.Chain{Name: "postrouting", Table: plugin, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	c.AddRule(&nftables.Rule{Table: plugin, Chain: chain, Exprs: []expr.Any{
		&expr.Immediate{Register: 1, Data: addr[:]},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 1},
	}})
	require.NoError(t, c.Flush())
	return c
}

// nftConn is an nftables connection in the named namespace.
func nftConn(t *testing.T, ns string) *nftables.Conn {
	h, err := netns.GetFromName(ns)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	require.NoError(t, err)
	return c
}

// noIPv6 turns IPv6 off in namespace ns, for the interfaces made in it
// later too: the route agents route IPv4, and an interface coming up would
// otherwise send IPv6 neighbour discovery through the VXLAN, packets the
// tests that count what crosses it would count.
func noIPv6(t *testing.T, ns string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1").CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// threeNamespaces makes the namespaces of the tests above, with an echo
// server at 10.99.0.1:7 in the remote one, answering with the address it
// sees; it returns the spoke's and the hub's.
func threeNamespaces(t *testing.T) (spoke, hub string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates network namespaces and interfaces")
	}
	id := fmt.Sprint(os.Getpid())
	spoke, hub, remote := "nrt-s-"+id, "nrt-h-"+id, "nrt-r-"+id
	for _, ns := range []string{spoke, hub, remote} {
		ip(t, "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		noIPv6(t, ns)
		ip(t, "-n", ns, "link", "set", "lo", "up")
	}
	link := func(a, aAddr, b, bAddr string) {
		ip(t, "link", "add", "nrt0", "netns", a, "type", "veth", "peer", "name", "nrt1", "netns", b)
		ip(t, "-n", a, "link", "set", "nrt0", "name", "to-"+b[:5])
		ip(t, "-n", b, "link", "set", "nrt1", "name", "to-"+a[:5])
		ip(t, "-n", a, "addr", "add", aAddr, "dev", "to-"+b[:5])
		ip(t, "-n", b, "addr", "add", bAddr, "dev", "to-"+a[:5])
		ip(t, "-n", a, "link", "set", "to-"+b[:5], "up")
		ip(t, "-n", b, "link", "set", "to-"+a[:5], "up")
	}
	link(spoke, "10.200.0.2/24", hub, "10.200.0.1/24")
	link(hub, "10.201.0.1/24", remote, "10.201.0.2/24")
	ip(t, "-n", remote, "addr", "add", "10.99.0.1/32", "dev", "lo")
	ip(t, "-n", remote, "route", "add", "default", "via", "10.201.0.1")
	ip(t, "-n", hub, "route", "add", "10.99.0.0/24", "via", "10.201.0.2")
	require.NoError(t, exec.Command("ip", "netns", "exec", hub, "sysctl", "-qw", "net.ipv4.ip_forward=1").Run())

	echo := listenUDP(t, remote, "10.99.0.1:7")
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteTo([]byte(from.String()), from)
		}
	}()

	return spoke, hub
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoError(t, err, "ip %s: %s", strings.Join(args, " "), out)
}

func applier(t *testing.T, ns string) *Applier {
	h, err := netns.GetFromName(ns)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	handle, err := netlink.NewHandleAt(h)
	require.NoError(t, err)
	t.Cleanup(handle.Close)
	// The test's namespaces filter no reverse path; their sysctls are not
	// this process's /proc/sys.
	return &Applier{Handle: handle, ProcSys: t.TempDir()}
}

// inNetns runs f on a thread in the named namespace: the sockets it opens
// stay there.
func inNetns(t *testing.T, ns string, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	require.NoError(t, err)
	defer func() { require.NoError(t, netns.Set(orig)); _ = orig.Close() }()
	h, err := netns.GetFromName(ns)
	require.NoError(t, err)
	defer func() { _ = h.Close() }()
	require.NoError(t, netns.Set(h))
	f()
}

func listenUDP(t *testing.T, ns, addr string) net.PacketConn {
	var c net.PacketConn
	inNetns(t, ns, func() {
		var err error
		c, err = net.ListenPacket("udp4", addr)
		require.NoError(t, err)
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// exchange sends a datagram from ns to addr and returns the answer.
func exchange(t *testing.T, ns, addr string) (string, error) {
	var c net.Conn
	var err error
	inNetns(t, ns, func() { c, err = net.Dial("udp4", addr) })
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write([]byte("hello")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// The gateway's node accepts VXLAN from the plan's peers (the cluster's
// nodes) only: packets from any other address are dropped before they are
// decapsulated (the drop rule counts them, the interface receives none),
// and pass once the sender's address is a peer's.
func TestApplyAcceptsVXLANFromPeersOnly(t *testing.T) {
	spoke, hub := threeNamespaces(t)
	_, err := applier(t, spoke).Apply(Plan{Role: RoleSpoke, GatewayNode: "hub", Gateway: netip.MustParseAddr("10.200.0.1"),
		Routes: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/24")}})
	require.NoError(t, err)
	hubA := applier(t, hub)
	hubA.NAT = nftConn(t, hub)
	others := []netip.Addr{netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.3")}
	_, err = hubA.Apply(Plan{Role: RoleHub, GatewayNode: "hub", Peers: others})
	require.NoError(t, err)

	_, err = exchange(t, spoke, "10.99.0.1:7")
	require.Error(t, err, "a node that is not a peer sent through the VXLAN")
	require.NotZero(t, dropped(t, hubA.NAT, "input"), "the drop rule counted nothing")
	link, err := hubA.Handle.LinkByName(Device)
	require.NoError(t, err)
	require.Zero(t, link.Attrs().Statistics.RxPackets, "the hub's interface received a packet from a stranger")

	_, err = hubA.Apply(Plan{Role: RoleHub, GatewayNode: "hub", Peers: append(others, netip.MustParseAddr("10.200.0.2"))})
	require.NoError(t, err)
	answer, err := exchange(t, spoke, "10.99.0.1:7")
	require.NoError(t, err, "a peer's packets are dropped")
	require.True(t, strings.HasPrefix(answer, "10.200.0.2:"), "the remote sees %s", answer)

	_, err = hubA.Apply(Plan{Role: RoleHub, GatewayNode: "hub"})
	require.NoError(t, err)
	tables, err := hubA.NAT.ListTablesOfFamily(nftables.TableFamilyIPv4)
	require.NoError(t, err)
	for _, tb := range tables {
		require.NotEqual(t, NATTable, tb.Name, "a table with neither routes nor peers")
	}
	_, err = exchange(t, spoke, "10.99.0.1:7")
	require.NoError(t, err, "without peers, VXLAN is accepted from anywhere")
}

// dropped is the packet count of the VXLAN filter's drop rule in chain
// ("input" or "forward").
func dropped(t *testing.T, c *nftables.Conn, chain string) uint64 {
	t.Helper()
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: NATTable}
	rules, err := c.GetRules(table, &nftables.Chain{Name: chain, Table: table})
	require.NoError(t, err)
	require.Len(t, rules, 1)
	for _, e := range rules[0].Exprs {
		if counter, ok := e.(*expr.Counter); ok {
			return counter.Packets
		}
	}
	t.Fatal("the drop rule has no counter")
	return 0
}

// A pod cannot send into the VXLAN through its node: a network plugin that
// masquerades what leaves the node gives the pod's packets the node's
// address, which the gateway's node accepts VXLAN from. The pod's node,
// which forwards them, drops them; without its table (the control), a
// frame the pod makes arrives on the hub's interface.
func TestApplyDropsAPodsVXLAN(t *testing.T) {
	spoke, hub := threeNamespaces(t)
	pod := "nrt-p-" + fmt.Sprint(os.Getpid())
	ip(t, "netns", "add", pod)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", pod).Run() })
	noIPv6(t, pod)
	ip(t, "link", "add", "nrt0", "netns", spoke, "type", "veth", "peer", "name", "nrt1", "netns", pod)
	ip(t, "-n", spoke, "addr", "add", "10.244.1.1/24", "dev", "nrt0")
	ip(t, "-n", pod, "addr", "add", "10.244.1.2/24", "dev", "nrt1")
	ip(t, "-n", spoke, "link", "set", "nrt0", "up")
	ip(t, "-n", pod, "link", "set", "nrt1", "up")
	ip(t, "-n", pod, "route", "add", "default", "via", "10.244.1.1")
	require.NoError(t, exec.Command("ip", "netns", "exec", spoke, "sysctl", "-qw", "net.ipv4.ip_forward=1").Run())
	// The plugin's masquerade: what leaves for the node network has the
	// node's address.
	pluginMasquerade(t, spoke, [4]byte{10, 200, 0, 2})

	nodes := []netip.Addr{netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.2")}
	hubA := applier(t, hub)
	hubA.NAT = nftConn(t, hub)
	_, err := hubA.Apply(Plan{Role: RoleHub, GatewayNode: "hub", Peers: nodes})
	require.NoError(t, err)
	plan := Plan{Role: RoleSpoke, GatewayNode: "hub", Gateway: netip.MustParseAddr("10.200.0.1"),
		Routes: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/24")}, Peers: nodes}
	without := applier(t, spoke)
	_, err = without.Apply(plan)
	require.NoError(t, err)

	received := func() uint64 {
		link, err := hubA.Handle.LinkByName(Device)
		require.NoError(t, err)
		return link.Attrs().Statistics.RxPackets
	}
	send := func() {
		var c net.Conn
		inNetns(t, pod, func() { c, err = net.Dial("udp4", fmt.Sprintf("10.200.0.1:%d", DefaultPort)) })
		require.NoError(t, err)
		defer func() { _ = c.Close() }()
		_, err = c.Write(vxlanFrame(DefaultVNI))
		require.NoError(t, err)
	}
	send()
	require.Eventually(t, func() bool { return received() > 0 }, 10*time.Second, 10*time.Millisecond,
		"the pod's frame did not arrive on the hub's interface without the spoke's table (the control)")

	with := applier(t, spoke)
	with.NAT = nftConn(t, spoke)
	_, err = with.Apply(plan)
	require.NoError(t, err)
	before := received()
	send()
	// The drop is counted when the spoke forwards the packet, before it
	// could reach the hub: once counted, the frame is known gone.
	require.Eventually(t, func() bool { return dropped(t, with.NAT, "forward") > 0 },
		10*time.Second, 10*time.Millisecond, "the spoke forwarded its pod's VXLAN packet")
	require.Equal(t, before, received(), "the pod's frame arrived on the hub's interface")

	answer, err := exchange(t, spoke, "10.99.0.1:7")
	require.NoError(t, err, "the node's own traffic no longer goes through the VXLAN")
	require.True(t, strings.HasPrefix(answer, "10.200.0.2:"), "the remote sees %s", answer)
}

// vxlanFrame is a VXLAN packet's payload with the given VNI: an Ethernet
// frame to HubMAC holding an IPv4 datagram to the remote (10.99.0.1:7).
func vxlanFrame(vni int) []byte {
	b := []byte{0x08, 0, 0, 0, byte(vni >> 16), byte(vni >> 8), byte(vni), 0}
	b = append(b, HubMAC...)
	b = append(b, 0x02, 0, 0, 0, 0, 0x99, 0x08, 0x00)
	ipHeader := []byte{0x45, 0, 0, 33, 0, 0, 0, 0, 64, unix.IPPROTO_UDP, 0, 0, 10, 244, 1, 2, 10, 99, 0, 1}
	var sum uint32
	for i := 0; i < len(ipHeader); i += 2 {
		sum += uint32(ipHeader[i])<<8 | uint32(ipHeader[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	ipHeader[10], ipHeader[11] = byte(^sum>>8), byte(^sum)
	b = append(b, ipHeader...)
	// UDP from 40000 to 7, 13 bytes, no checksum, then "hello".
	return append(b, 0x9c, 0x40, 0, 7, 0, 13, 0, 0, 'h', 'e', 'l', 'l', 'o')
}
