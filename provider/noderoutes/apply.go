package noderoutes

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// Applier configures a network namespace (the node's) to a Plan.
type Applier struct {
	// Handle is the netlink handle of the namespace.
	Handle *netlink.Handle
	// Port and VNI of the VXLAN (DefaultPort, DefaultVNI when 0).
	Port, VNI int
	// ProcSys is where the namespace's sysctls are ("/proc/sys" when
	// empty): reverse path filtering is read and set there.
	ProcSys string
	// NAT, when set, is the namespace's nftables connection: the pods'
	// traffic to the routes keeps its source address, and VXLAN comes
	// from the plan's peers only (setTable).
	NAT *nftables.Conn
}

// Apply makes the namespace's interface and routes those of p. It returns
// warnings: what it could not set that may drop packets (a strict reverse
// path filter it may not change).
func (a *Applier) Apply(p Plan) (warnings []string, err error) {
	switch p.Role {
	case RoleHub:
		warnings, err = a.hub()
	case RoleSpoke:
		warnings, err = a.spoke(p)
	default:
		return nil, a.Remove()
	}
	if err == nil && a.NAT != nil {
		err = setTable(a.NAT, p, a.port())
	}
	return warnings, err
}

// Remove deletes the interface, and its routes with it, and lets the
// network plugin's source NAT be.
func (a *Applier) Remove() error {
	if a.NAT != nil {
		if err := setTable(a.NAT, Plan{}, a.port()); err != nil {
			return err
		}
	}
	l, err := a.Handle.LinkByName(Device)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return err
	}
	return a.Handle.LinkDel(l)
}

func (a *Applier) port() int { return or(a.Port, DefaultPort) }
func (a *Applier) vni() int  { return or(a.VNI, DefaultVNI) }

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// hub holds the receiving end: the packets the other nodes send arrive
// addressed to HubMAC and are forwarded by the kernel like any other.
func (a *Applier) hub() ([]string, error) {
	mtu := 1450
	if routes, err := a.Handle.RouteGet(net.IPv4(1, 1, 1, 1)); err == nil && len(routes) > 0 {
		if l, err := a.Handle.LinkByIndex(routes[0].LinkIndex); err == nil {
			mtu = l.Attrs().MTU - overhead
		}
	}
	want := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: Device, MTU: mtu, HardwareAddr: HubMAC},
		VxlanId: a.vni(), Port: a.port()}
	link, err := a.ensure(want, func(v *netlink.Vxlan) bool { return v.Group == nil && v.HardwareAddr.String() == HubMAC.String() })
	if err != nil {
		return nil, err
	}
	// A node that was not the gateway before kept no route here: the
	// interface was made anew (ensure) since its remote differs.
	return a.loosen(link.Attrs().Name), nil
}

// spoke holds the sending end to the gateway's node and routes p.Routes
// through it.
func (a *Applier) spoke(p Plan) ([]string, error) {
	routes, err := a.Handle.RouteGet(p.Gateway.AsSlice())
	if err != nil {
		return nil, fmt.Errorf("no route to the gateway's node %s (%s): %w", p.GatewayNode, p.Gateway, err)
	}
	if len(routes) == 0 {
		return nil, fmt.Errorf("no route to the gateway's node %s (%s)", p.GatewayNode, p.Gateway)
	}
	under, err := a.Handle.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return nil, err
	}
	gw := net.IP(p.Gateway.AsSlice())
	want := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: Device, MTU: under.Attrs().MTU - overhead},
		VxlanId: a.vni(), Port: a.port(), Group: gw, VtepDevIndex: under.Attrs().Index}
	link, err := a.ensure(want, func(v *netlink.Vxlan) bool {
		return v.Group.Equal(gw) && v.VtepDevIndex == under.Attrs().Index
	})
	if err != nil {
		return nil, err
	}
	hub := net.IP(HubIP.AsSlice())
	if err := a.Handle.NeighSet(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4,
		State: netlink.NUD_PERMANENT, IP: hub, HardwareAddr: HubMAC}); err != nil {
		return nil, fmt.Errorf("neighbour %s on %s: %w", HubIP, Device, err)
	}
	have, err := a.Handle.RouteList(link, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	for _, r := range have {
		if r.Dst == nil {
			continue
		}
		if d, ok := netip.AddrFromSlice(r.Dst.IP.To4()); ok {
			ones, _ := r.Dst.Mask.Size()
			if slices.Contains(p.Routes, netip.PrefixFrom(d, ones)) {
				continue
			}
		}
		if err := a.Handle.RouteDel(&r); err != nil {
			return nil, fmt.Errorf("removing the route to %s: %w", r.Dst, err)
		}
	}
	for _, dst := range p.Routes {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 32)},
			Gw: hub, Flags: int(netlink.FLAG_ONLINK)}
		if err := a.Handle.RouteReplace(r); err != nil {
			return nil, fmt.Errorf("route to %s through %s: %w", dst, Device, err)
		}
	}
	// The answers come back on the node's own interface from addresses
	// routed through the VXLAN.
	return append(a.loosen(Device), a.loosen(under.Attrs().Name)...), nil
}

// ensure returns the interface named want.Name, made anew unless it is a
// VXLAN of the same VNI and port that same accepts, and set up.
func (a *Applier) ensure(want *netlink.Vxlan, same func(*netlink.Vxlan) bool) (netlink.Link, error) {
	if l, err := a.Handle.LinkByName(want.Name); err == nil {
		v, ok := l.(*netlink.Vxlan)
		if ok && v.VxlanId == want.VxlanId && v.Port == want.Port && same(v) {
			if l.Attrs().OperState != netlink.OperUp || l.Attrs().Flags&net.FlagUp == 0 {
				if err := a.Handle.LinkSetUp(l); err != nil {
					return nil, err
				}
			}
			return l, nil
		}
		if err := a.Handle.LinkDel(l); err != nil {
			return nil, fmt.Errorf("replacing %s: %w", want.Name, err)
		}
	}
	if err := a.Handle.LinkAdd(want); err != nil {
		return nil, fmt.Errorf("creating the VXLAN interface %s: %w", want.Name, err)
	}
	l, err := a.Handle.LinkByName(want.Name)
	if err != nil {
		return nil, err
	}
	if err := a.Handle.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("set %s up: %w", want.Name, err)
	}
	return l, nil
}

// loosen sets the interface's reverse path filter to loose (2) where it is
// strict (the larger of all's and the interface's is 1); a warning when it
// cannot.
func (a *Applier) loosen(dev string) []string {
	root := a.ProcSys
	if root == "" {
		root = "/proc/sys"
	}
	read := func(name string) int {
		b, err := os.ReadFile(filepath.Join(root, "net/ipv4/conf", name, "rp_filter"))
		if err != nil {
			return 0
		}
		var v int
		_, _ = fmt.Sscan(strings.TrimSpace(string(b)), &v)
		return v
	}
	if max(read("all"), read(dev)) != 1 {
		return nil
	}
	path := filepath.Join(root, "net/ipv4/conf", dev, "rp_filter")
	if err := os.WriteFile(path, []byte("2"), 0o644); err != nil {
		return []string{fmt.Sprintf("reverse path filtering is strict on %s and could not be made loose (%v): answers from other clusters "+
			"arriving there are dropped; set net.ipv4.conf.%s.rp_filter=2 on the node", dev, err, dev)}
	}
	return nil
}
