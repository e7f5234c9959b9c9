package gateway

import (
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func key(t *testing.T) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	require.NoError(t, err)
	return k.PublicKey()
}

func TestPeersConfig(t *testing.T) {
	parent, child, gone := key(t), key(t), key(t)
	got := peersConfig([]Peer{
		{PublicKey: parent, Endpoint: netip.MustParseAddrPort("10.250.0.3:51820"), Keepalive: 5 * time.Second,
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.1.0.7/16"), netip.MustParsePrefix("10.2.0.0/16")}},
		{PublicKey: child, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.3.0.0/24")}},
	}, []wgtypes.Key{child, gone})
	require.Equal(t, "public_key="+hex.EncodeToString(parent[:])+"\n"+
		"endpoint=10.250.0.3:51820\n"+
		"persistent_keepalive_interval=5\n"+
		"replace_allowed_ips=true\n"+
		"allowed_ip=10.1.0.0/16\n"+
		"allowed_ip=10.2.0.0/16\n"+
		// A peer without an endpoint keeps the one it roamed to.
		"public_key="+hex.EncodeToString(child[:])+"\n"+
		"persistent_keepalive_interval=0\n"+
		"replace_allowed_ips=true\n"+
		"allowed_ip=10.3.0.0/24\n"+
		// Configured, no longer listed: removed.
		"public_key="+hex.EncodeToString(gone[:])+"\n"+
		"remove=true\n", got)
}

func TestParseStatus(t *testing.T) {
	a, b := key(t), key(t)
	get := "private_key=" + hex.EncodeToString(make([]byte, 32)) + "\n" +
		"listen_port=40123\n" +
		"public_key=" + hex.EncodeToString(a[:]) + "\n" +
		"protocol_version=1\n" +
		"endpoint=10.250.0.4:38001\n" +
		"last_handshake_time_sec=1700000000\n" +
		"last_handshake_time_nsec=5\n" +
		"tx_bytes=100\n" +
		"rx_bytes=200\n" +
		"persistent_keepalive_interval=0\n" +
		"allowed_ip=10.3.0.0/24\n" +
		"public_key=" + hex.EncodeToString(b[:]) + "\n" +
		"protocol_version=1\n" +
		"last_handshake_time_sec=0\n" +
		"last_handshake_time_nsec=0\n" +
		"tx_bytes=0\n" +
		"rx_bytes=0\n"
	port, err := listenPort(get)
	require.NoError(t, err)
	require.Equal(t, 40123, port)
	peers, err := parsePeers(get)
	require.NoError(t, err)
	require.Equal(t, []PeerStatus{
		{PublicKey: a, Endpoint: netip.MustParseAddrPort("10.250.0.4:38001"), LastHandshake: time.Unix(1700000000, 5),
			TxBytes: 100, RxBytes: 200, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.3.0.0/24")}},
		{PublicKey: b},
	}, peers)

	_, err = parsePeers("public_key=zz\n")
	require.Error(t, err)
	_, err = listenPort("private_key=00\n")
	require.Error(t, err)
}
