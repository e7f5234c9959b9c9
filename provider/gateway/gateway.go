// Package gateway is a cluster's end of the WireGuard peer links that carry
// pod traffic between the clusters of a tree: a TUN interface run by
// wireguard-go (the userspace implementation, golang.zx2c4.com/wireguard:
// no kernel module needed) in this process, its peers, and the routes of
// their pod CIDRs through it.
//
// A child behind NAT knows its parent's endpoint and dials it,
// keeping it open with keepalives; its parent learns the child's endpoint
// from the child's handshakes, as WireGuard roams, and so reaches the
// child through the NAT on the path the child opened. Packets keep their
// source addresses: a pod's address reaches the other end unchanged.
//
// The gateway is configured as wireguard-go's own tools configure it, with
// its cross-platform configuration protocol (device.IpcSet), in-process:
// no configuration socket is left on the machine.
package gateway

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// DefaultMTU leaves room for WireGuard's 60 bytes (IPv4 outer header, UDP,
// WireGuard's header and tag) and more within a 1,500-byte path.
const DefaultMTU = 1420

// DefaultPort is the UDP port a parent's gateway listens on unless told
// otherwise (WireGuard's usual one).
const DefaultPort = 51820

// Options configure a Gateway.
type Options struct {
	// Interface is the name of the TUN interface (15 characters at most).
	Interface string
	// PrivateKey is the gateway's key; a new one when zero.
	PrivateKey wgtypes.Key
	// ListenPort is the UDP port to listen on; 0 picks a free one (a child
	// behind NAT needs no fixed port).
	ListenPort int
	// Addresses are given to the interface: the address this cluster's
	// own traffic to the peers leaves with.
	Addresses []netip.Prefix
	// MTU of the interface; DefaultMTU when 0.
	MTU int
	// Logf receives wireguard-go's errors (and its debug lines with
	// Verbose); nothing when nil.
	Logf    func(format string, args ...any)
	Verbose bool
	// Implementation is ImplementationAuto (when empty),
	// ImplementationKernel or ImplementationUserspace.
	Implementation string
}

// Peer is the other end of one peer link.
type Peer struct {
	PublicKey wgtypes.Key
	// Endpoint is the peer's UDP address, when this end dials the link
	// (a child: its parent's gateway); invalid when the peer opens it
	// (a parent, for a child behind NAT).
	Endpoint netip.AddrPort
	// AllowedIPs are what the peer may send from and what is routed to it.
	AllowedIPs []netip.Prefix
	// Keepalive is sent by the end behind NAT to keep the path open; 0
	// sends none.
	Keepalive time.Duration
}

// PeerStatus is what the gateway knows of one peer.
type PeerStatus struct {
	PublicKey wgtypes.Key
	// Endpoint is the peer's address, configured or learned from its
	// handshakes; invalid before the first.
	Endpoint netip.AddrPort
	// LastHandshake is zero before the first handshake.
	LastHandshake    time.Time
	RxBytes, TxBytes int64
	AllowedIPs       []netip.Prefix
	// RTT is the round trip to the peer measured at the last handshake
	// (rttBind); 0 when unknown: before a handshake, or on the kernel's
	// WireGuard.
	RTT time.Duration
}

// Gateway is a running WireGuard interface.
type Gateway struct {
	name string
	key  wgtypes.Key
	port int
	dev  engine
	link netlink.Link
	// rtt times the handshakes of wireguard-go; nil on the kernel's.
	rtt *rttBind
	// impl is the implementation it runs on; fallback why not the
	// kernel's, when auto chose wireguard-go.
	impl, fallback string

	mu     sync.Mutex
	routes []netip.Prefix
	peers  []Peer // as last set
}

// ErrNoTUN is returned where the machine offers no TUN device.
var ErrNoTUN = errors.New("no TUN device (/dev/net/tun): the gateway needs one; in a container, give it /dev/net/tun and CAP_NET_ADMIN")

// Start creates the interface in this process's network namespace, brings
// it up and listens: the kernel's WireGuard where the host has it (or
// where Options.Implementation asks for it), wireguard-go otherwise.
func Start(o Options) (g *Gateway, err error) {
	if len(o.Interface) == 0 || len(o.Interface) > 15 {
		return nil, fmt.Errorf("interface name %q: 1 to 15 characters", o.Interface)
	}
	key := o.PrivateKey
	if key == (wgtypes.Key{}) {
		if key, err = wgtypes.GeneratePrivateKey(); err != nil {
			return nil, err
		}
	}
	mtu := o.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	g = &Gateway{name: o.Interface, key: key}
	switch o.Implementation {
	case ImplementationKernel:
		g.dev, err = startKernel(o.Interface, mtu)
		g.impl = ImplementationKernel
	case "", ImplementationAuto:
		if g.dev, err = startKernel(o.Interface, mtu); err == nil {
			g.impl = ImplementationKernel
			break
		}
		g.fallback = err.Error()
		fallthrough
	case ImplementationUserspace:
		g.dev, g.rtt, err = startUserspace(o, mtu)
		g.impl = ImplementationUserspace
	default:
		return nil, fmt.Errorf("WireGuard implementation %q: use %s, %s or %s", o.Implementation, ImplementationAuto, ImplementationKernel, ImplementationUserspace)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			g.dev.Close()
		}
	}()
	if err := g.dev.IpcSet(deviceConfig(key, o.ListenPort)); err != nil {
		return nil, fmt.Errorf("configure %s: %w", o.Interface, err)
	}
	if err := g.dev.Up(); err != nil {
		return nil, fmt.Errorf("bring %s up: %w", o.Interface, err)
	}
	status, err := g.dev.IpcGet()
	if err != nil {
		return nil, err
	}
	if g.port, err = listenPort(status); err != nil {
		return nil, err
	}
	if g.link, err = netlink.LinkByName(o.Interface); err != nil {
		return nil, fmt.Errorf("interface %s: %w", o.Interface, err)
	}
	for _, a := range o.Addresses {
		if err := netlink.AddrReplace(g.link, &netlink.Addr{IPNet: ipNet(a)}); err != nil {
			return nil, fmt.Errorf("address %s on %s: %w", a, o.Interface, err)
		}
	}
	if err := netlink.LinkSetUp(g.link); err != nil {
		return nil, fmt.Errorf("set %s up: %w", o.Interface, err)
	}
	return g, nil
}

// startUserspace runs wireguard-go on a TUN device, its handshakes timed.
func startUserspace(o Options, mtu int) (*device.Device, *rttBind, error) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoTUN, err)
	}
	t, err := tun.CreateTUN(o.Interface, mtu)
	if err != nil {
		return nil, nil, fmt.Errorf("create TUN %s: %w", o.Interface, err)
	}
	logger := &device.Logger{Verbosef: device.DiscardLogf, Errorf: device.DiscardLogf}
	if o.Logf != nil {
		logger.Errorf = o.Logf
		if o.Verbose {
			logger.Verbosef = o.Logf
		}
	}
	bind := newRTTBind(conn.NewDefaultBind())
	return device.NewDevice(t, bind, logger), bind, nil
}

// Implementation is the WireGuard the gateway runs on
// (ImplementationKernel or ImplementationUserspace) and, when it chose
// wireguard-go by itself, why not the kernel's.
func (g *Gateway) Implementation() (impl, fallback string) { return g.impl, g.fallback }

// PublicKey is what peers know this gateway by.
func (g *Gateway) PublicKey() wgtypes.Key {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.key.PublicKey()
}

// SetPrivateKey replaces the gateway's key. Every session ends: each peer
// knows this gateway by its public key, and takes the new one only once
// told (the links are opened again then, see Reconnect).
func (g *Gateway) SetPrivateKey(key wgtypes.Key) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.dev.IpcSet(fmt.Sprintf("private_key=%s\n", hex.EncodeToString(key[:]))); err != nil {
		return fmt.Errorf("key of %s: %w", g.name, err)
	}
	g.key = key
	return nil
}

// Reconnect makes the peer of key anew, as last set: its session and
// handshake state are dropped and, when this end opens the tunnel (an
// endpoint and a keepalive), a handshake starts at once instead of at
// WireGuard's next retry (up to 5 s later). For a peer that just learned
// this gateway's new key, or this one the peer's.
func (g *Gateway) Reconnect(key wgtypes.Key) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.IndexFunc(g.peers, func(p Peer) bool { return p.PublicKey == key })
	if i < 0 {
		return fmt.Errorf("no peer %s on %s", key, g.name)
	}
	cfg := fmt.Sprintf("public_key=%s\nremove=true\n", hex.EncodeToString(key[:])) + peersConfig(g.peers[i:i+1], nil)
	if err := g.dev.IpcSet(cfg); err != nil {
		return fmt.Errorf("reconnect peer %s of %s: %w", key, g.name, err)
	}
	return nil
}

// Port is the UDP port the gateway listens on.
func (g *Gateway) Port() int { return g.port }

// Interface is the name of the gateway's interface.
func (g *Gateway) Interface() string { return g.name }

// SetPeers makes peers the gateway's peers, and routes each peer's
// allowed IPs through the interface: peers and routes no longer listed are
// removed. A peer whose key is unchanged keeps its session (no new
// handshake).
func (g *Gateway) SetPeers(peers []Peer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	current, err := g.Status()
	if err != nil {
		return err
	}
	keys := make([]wgtypes.Key, 0, len(current))
	for _, p := range current {
		keys = append(keys, p.PublicKey)
	}
	if err := g.dev.IpcSet(peersConfig(peers, keys)); err != nil {
		return fmt.Errorf("peers of %s: %w", g.name, err)
	}
	var want []netip.Prefix
	for _, p := range peers {
		want = append(want, p.AllowedIPs...)
	}
	var errs []error
	for _, r := range want {
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: g.link.Attrs().Index, Dst: ipNet(r.Masked())}); err != nil {
			errs = append(errs, fmt.Errorf("route %s via %s: %w", r, g.name, err))
		}
	}
	for _, r := range g.routes {
		if !slices.Contains(want, r) {
			err := netlink.RouteDel(&netlink.Route{LinkIndex: g.link.Attrs().Index, Dst: ipNet(r.Masked())})
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove route %s: %w", r, err))
			}
		}
	}
	g.routes = want
	g.peers = slices.Clone(peers)
	return errors.Join(errs...)
}

// Status returns what the gateway knows of each peer.
func (g *Gateway) Status() ([]PeerStatus, error) {
	s, err := g.dev.IpcGet()
	if err != nil {
		return nil, err
	}
	peers, err := parsePeers(s)
	if err != nil || g.rtt == nil {
		return peers, err
	}
	current := make(map[string]bool, len(peers))
	for i := range peers {
		if peers[i].Endpoint.IsValid() {
			ep := peers[i].Endpoint.String()
			current[ep] = true
			peers[i].RTT = g.rtt.RTT(ep)
		}
	}
	g.rtt.keep(current)
	return peers, nil
}

// Close removes the interface (and its routes with it) and stops the
// gateway.
func (g *Gateway) Close() {
	g.dev.Close()
}
