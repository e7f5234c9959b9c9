package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Implementations of WireGuard a gateway can run on.
const (
	// ImplementationAuto takes the kernel's where the host has the
	// module, wireguard-go otherwise.
	ImplementationAuto = "auto"
	// ImplementationKernel is the kernel's WireGuard (Linux 5.6 and later,
	// or the module), configured over netlink with wgctrl.
	ImplementationKernel = "kernel"
	// ImplementationUserspace is wireguard-go on a TUN device, in this
	// process.
	ImplementationUserspace = "userspace"
)

// engine is the WireGuard implementation behind a gateway's interface,
// spoken to in the cross-platform configuration protocol (uapi.go):
// wireguard-go's device speaks it natively, the kernel's through
// kernelEngine.
type engine interface {
	IpcSet(config string) error
	IpcGet() (string, error)
	Up() error
	Close()
}

// kernelEngine is the kernel's WireGuard interface of a gateway.
type kernelEngine struct {
	name   string
	client *wgctrl.Client
	link   netlink.Link
}

// errNoKernelWireGuard: the host's kernel has no WireGuard (no module, or
// none that may be loaded).
var errNoKernelWireGuard = errors.New("the kernel has no WireGuard")

// startKernel creates a kernel WireGuard interface of that name and MTU.
func startKernel(name string, mtu int) (*kernelEngine, error) {
	// A kernel interface outlives the process that made it: one of this
	// name left by a gateway that crashed is removed first.
	if old, err := netlink.LinkByName(name); err == nil && old.Type() == "wireguard" {
		if err := netlink.LinkDel(old); err != nil {
			return nil, fmt.Errorf("removing %s, left by an earlier gateway: %w", name, err)
		}
	}
	link := &netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
	if err := netlink.LinkAdd(link); err != nil {
		return nil, fmt.Errorf("%w: creating %s: %w", errNoKernelWireGuard, name, err)
	}
	client, err := wgctrl.New()
	if err == nil {
		_, err = client.Device(name)
	}
	if err != nil {
		_ = netlink.LinkDel(link)
		if client != nil {
			_ = client.Close()
		}
		return nil, fmt.Errorf("%w: %s made, but not configurable: %w", errNoKernelWireGuard, name, err)
	}
	return &kernelEngine{name: name, client: client, link: link}, nil
}

func (k *kernelEngine) IpcSet(config string) error {
	cfg, err := parseConfig(config)
	if err != nil {
		return err
	}
	return k.client.ConfigureDevice(k.name, cfg)
}

func (k *kernelEngine) IpcGet() (string, error) {
	d, err := k.client.Device(k.name)
	if err != nil {
		return "", err
	}
	return formatDevice(d), nil
}

func (k *kernelEngine) Up() error { return netlink.LinkSetUp(k.link) }

// Close removes the interface, its routes with it.
func (k *kernelEngine) Close() {
	_ = netlink.LinkDel(k.link)
	_ = k.client.Close()
}

// parseConfig reads a configuration of the cross-platform protocol (what
// deviceConfig and peersConfig write) into wgctrl's.
func parseConfig(config string) (wgtypes.Config, error) {
	var cfg wgtypes.Config
	var peer *wgtypes.PeerConfig
	s := bufio.NewScanner(strings.NewReader(config))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return cfg, fmt.Errorf("configuration line %q: no '='", line)
		}
		if k == "public_key" {
			key, err := hexKey(v)
			if err != nil {
				return cfg, err
			}
			cfg.Peers = append(cfg.Peers, wgtypes.PeerConfig{PublicKey: key})
			peer = &cfg.Peers[len(cfg.Peers)-1]
			continue
		}
		if err := setField(&cfg, peer, k, v); err != nil {
			return cfg, fmt.Errorf("%s=%s: %w", k, v, err)
		}
	}
	return cfg, s.Err()
}

// setField sets one key of the configuration: the device's before the
// first public_key, that peer's after it.
func setField(cfg *wgtypes.Config, peer *wgtypes.PeerConfig, k, v string) error {
	if peer == nil {
		switch k {
		case "private_key":
			key, err := hexKey(v)
			cfg.PrivateKey = &key
			return err
		case "listen_port":
			port, err := strconv.Atoi(v)
			cfg.ListenPort = &port
			return err
		case "replace_peers":
			cfg.ReplacePeers = v == "true"
			return nil
		}
		return fmt.Errorf("not a device key")
	}
	switch k {
	case "remove":
		peer.Remove = v == "true"
	case "endpoint":
		ap, err := netip.ParseAddrPort(v)
		if err != nil {
			return err
		}
		peer.Endpoint = net.UDPAddrFromAddrPort(ap)
	case "persistent_keepalive_interval":
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		d := time.Duration(n) * time.Second
		peer.PersistentKeepaliveInterval = &d
	case "replace_allowed_ips":
		peer.ReplaceAllowedIPs = v == "true"
	case "allowed_ip":
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return err
		}
		peer.AllowedIPs = append(peer.AllowedIPs, *ipNet(p))
	default:
		return fmt.Errorf("not a peer key")
	}
	return nil
}

// formatDevice writes what a device reports in the cross-platform
// protocol's terms (what listenPort and parsePeers read).
func formatDevice(d *wgtypes.Device) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen_port=%d\n", d.ListenPort)
	for _, p := range d.Peers {
		fmt.Fprintf(&b, "public_key=%x\n", p.PublicKey[:])
		if p.Endpoint != nil {
			ap := p.Endpoint.AddrPort()
			fmt.Fprintf(&b, "endpoint=%s\n", netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
		}
		if !p.LastHandshakeTime.IsZero() {
			fmt.Fprintf(&b, "last_handshake_time_sec=%d\nlast_handshake_time_nsec=%d\n",
				p.LastHandshakeTime.Unix(), p.LastHandshakeTime.Nanosecond())
		}
		fmt.Fprintf(&b, "rx_bytes=%d\ntx_bytes=%d\n", p.ReceiveBytes, p.TransmitBytes)
		fmt.Fprintf(&b, "persistent_keepalive_interval=%d\n", int(p.PersistentKeepaliveInterval/time.Second))
		for _, a := range p.AllowedIPs {
			if pfx, ok := prefixOf(a); ok {
				fmt.Fprintf(&b, "allowed_ip=%s\n", pfx)
			}
		}
	}
	return b.String()
}

// prefixOf is n as a netip.Prefix.
func prefixOf(n net.IPNet) (netip.Prefix, bool) {
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, total := n.Mask.Size()
	if addr.Is4In6() && total == 128 {
		ones -= 96
	}
	return netip.PrefixFrom(addr.Unmap(), ones), true
}
