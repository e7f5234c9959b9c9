package gateway

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// The kernel's interface is driven by the same configuration as
// wireguard-go's: what deviceConfig and peersConfig write reads back as
// wgctrl's configuration, key by key.
func TestParseConfig(t *testing.T) {
	priv, err := wgtypes.GeneratePrivateKey()
	require.NoError(t, err)
	parent, child, gone := key(t), key(t), key(t)
	cfg, err := parseConfig(deviceConfig(priv, 51820) + peersConfig([]Peer{
		{PublicKey: parent, Endpoint: netip.MustParseAddrPort("10.250.0.3:51820"), Keepalive: 5 * time.Second,
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}},
		{PublicKey: child, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.3.0.0/24")}},
	}, []wgtypes.Key{gone}))
	require.NoError(t, err)
	require.Equal(t, priv, *cfg.PrivateKey)
	require.Equal(t, 51820, *cfg.ListenPort)
	require.False(t, cfg.ReplacePeers, "peers not listed are removed one by one, the others keep their sessions")
	require.Len(t, cfg.Peers, 3)
	p := cfg.Peers[0]
	require.Equal(t, parent, p.PublicKey)
	require.Equal(t, "10.250.0.3:51820", p.Endpoint.String())
	require.Equal(t, 5*time.Second, *p.PersistentKeepaliveInterval)
	require.True(t, p.ReplaceAllowedIPs)
	require.Equal(t, []net.IPNet{*ipNet(netip.MustParsePrefix("10.1.0.0/16"))}, p.AllowedIPs)
	require.Nil(t, cfg.Peers[1].Endpoint, "a peer without an endpoint keeps the one it roamed to")
	require.Equal(t, gone, cfg.Peers[2].PublicKey)
	require.True(t, cfg.Peers[2].Remove)

	_, err = parseConfig("public_key=" + "00" + "\n")
	require.Error(t, err)
	_, err = parseConfig("endpoint=10.0.0.1:1\n")
	require.ErrorContains(t, err, "not a device key")
}

// What the kernel reports reads as wireguard-go's report does.
func TestFormatDevice(t *testing.T) {
	peer := key(t)
	hs := time.Unix(1764150000, 123)
	d := &wgtypes.Device{ListenPort: 51820, Peers: []wgtypes.Peer{{
		PublicKey: peer, Endpoint: &net.UDPAddr{IP: net.ParseIP("10.250.0.7"), Port: 40000},
		LastHandshakeTime: hs, ReceiveBytes: 10, TransmitBytes: 20, PersistentKeepaliveInterval: 25 * time.Second,
		AllowedIPs: []net.IPNet{{IP: net.ParseIP("10.3.0.0"), Mask: net.CIDRMask(120, 128)}, *ipNet(netip.MustParsePrefix("10.4.0.0/16"))},
	}}}
	text := formatDevice(d)
	port, err := listenPort(text)
	require.NoError(t, err)
	require.Equal(t, 51820, port)
	peers, err := parsePeers(text)
	require.NoError(t, err)
	require.Equal(t, []PeerStatus{{PublicKey: peer, Endpoint: netip.MustParseAddrPort("10.250.0.7:40000"), LastHandshake: hs,
		RxBytes: 10, TxBytes: 20, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.3.0.0/24"), netip.MustParsePrefix("10.4.0.0/16")}}}, peers)
}

// In a network namespace of its own, a gateway starts on the kernel's
// WireGuard where the kernel has it and says so, else on wireguard-go and
// says why; asked for the kernel's where there is none, it fails with a
// reason and leaves no interface behind.
func TestStartChoosesAnImplementation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates network namespaces and interfaces")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	require.NoError(t, err)
	defer orig.Close()
	ns, err := netns.New() // and enters it
	require.NoError(t, err)
	defer func() {
		require.NoError(t, netns.Set(orig))
		ns.Close()
	}()

	g, err := Start(Options{Interface: "nstl-t0"})
	require.NoError(t, err)
	impl, fallback := g.Implementation()
	switch impl {
	case ImplementationKernel:
		require.Empty(t, fallback)
	case ImplementationUserspace:
		require.Contains(t, fallback, "the kernel has no WireGuard", "auto says why it fell back")
	default:
		t.Fatalf("implementation %q", impl)
	}
	require.NotZero(t, g.Port())
	peer := key(t)
	require.NoError(t, g.SetPeers([]Peer{{PublicKey: peer, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}}}))
	status, err := g.Status()
	require.NoError(t, err)
	require.Len(t, status, 1)
	require.Equal(t, peer, status[0].PublicKey)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}, status[0].AllowedIPs)
	g.Close()

	if impl == ImplementationUserspace {
		_, err := Start(Options{Interface: "nstl-t1", Implementation: ImplementationKernel})
		require.True(t, errors.Is(err, errNoKernelWireGuard), "%v", err)
		_, err = net.InterfaceByName("nstl-t1")
		require.Error(t, err, "nothing left behind")
	}
	_, err = Start(Options{Interface: "nstl-t2", Implementation: "quantum"})
	require.ErrorContains(t, err, `WireGuard implementation "quantum"`)
}
