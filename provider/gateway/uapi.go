package gateway

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// The configuration protocol of WireGuard's userspace implementations
// (https://www.wireguard.com/xplatform/): key=value lines, keys in hex.

// deviceConfig sets the private key and the listening port (0: any).
func deviceConfig(key wgtypes.Key, port int) string {
	return fmt.Sprintf("private_key=%s\nlisten_port=%d\n", hex.EncodeToString(key[:]), port)
}

// peersConfig configures peers and removes every other peer of current
// (the peers configured now): a peer kept keeps its session and, when
// peers gives it no endpoint, the endpoint it roamed to.
func peersConfig(peers []Peer, current []wgtypes.Key) string {
	var b strings.Builder
	listed := map[wgtypes.Key]bool{}
	for _, p := range peers {
		listed[p.PublicKey] = true
		fmt.Fprintf(&b, "public_key=%s\n", hex.EncodeToString(p.PublicKey[:]))
		if p.Endpoint.IsValid() {
			fmt.Fprintf(&b, "endpoint=%s\n", p.Endpoint)
		}
		fmt.Fprintf(&b, "persistent_keepalive_interval=%d\n", int(p.Keepalive/time.Second))
		b.WriteString("replace_allowed_ips=true\n")
		for _, a := range p.AllowedIPs {
			fmt.Fprintf(&b, "allowed_ip=%s\n", a.Masked())
		}
	}
	for _, k := range current {
		if !listed[k] {
			fmt.Fprintf(&b, "public_key=%s\nremove=true\n", hex.EncodeToString(k[:]))
		}
	}
	return b.String()
}

// listenPort reads the listening port from a device's configuration.
func listenPort(get string) (int, error) {
	for line := range strings.Lines(get) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "listen_port="); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("the device reports no listen_port")
}

// parsePeers reads the peers of a device's configuration.
func parsePeers(get string) ([]PeerStatus, error) {
	var out []PeerStatus
	var sec, nsec int64
	flush := func() {
		if len(out) > 0 && (sec != 0 || nsec != 0) {
			out[len(out)-1].LastHandshake = time.Unix(sec, nsec)
		}
		sec, nsec = 0, 0
	}
	s := bufio.NewScanner(strings.NewReader(get))
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), "=")
		if !ok {
			continue
		}
		if k == "public_key" {
			flush()
			key, err := hexKey(v)
			if err != nil {
				return nil, err
			}
			out = append(out, PeerStatus{PublicKey: key})
			continue
		}
		if len(out) == 0 {
			continue // the device's own lines
		}
		p := &out[len(out)-1]
		var err error
		switch k {
		case "endpoint":
			p.Endpoint, err = netip.ParseAddrPort(v)
		case "last_handshake_time_sec":
			sec, err = strconv.ParseInt(v, 10, 64)
		case "last_handshake_time_nsec":
			nsec, err = strconv.ParseInt(v, 10, 64)
		case "rx_bytes":
			p.RxBytes, err = strconv.ParseInt(v, 10, 64)
		case "tx_bytes":
			p.TxBytes, err = strconv.ParseInt(v, 10, 64)
		case "allowed_ip":
			var a netip.Prefix
			a, err = netip.ParsePrefix(v)
			p.AllowedIPs = append(p.AllowedIPs, a)
		}
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", k, v, err)
		}
	}
	flush()
	return out, s.Err()
}

func hexKey(s string) (wgtypes.Key, error) {
	var k wgtypes.Key
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(k) {
		return k, fmt.Errorf("bad key %q", s)
	}
	copy(k[:], b)
	return k, nil
}

// ipNet is p as a net.IPNet (what netlink takes).
func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
