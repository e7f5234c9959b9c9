// Package peerstest holds a fake gateway for the tests of the packages that
// configure peers (provider/peers, provider/parent).
package peerstest

import (
	"net/netip"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/nestlet/nestlet/provider/gateway"
)

// Gateway is a peers.Device that records the peers it is given and the
// reconnections asked.
type Gateway struct {
	Key        wgtypes.Key
	Peers      []gateway.Peer
	Reconnects []wgtypes.Key
}

// NewGateway returns a fake gateway with a new key.
func NewGateway() *Gateway { return &Gateway{Key: PublicKey()} }

func (f *Gateway) PublicKey() wgtypes.Key { return f.Key }

func (f *Gateway) SetPrivateKey(k wgtypes.Key) error {
	f.Key = k.PublicKey()
	return nil
}

func (f *Gateway) Reconnect(k wgtypes.Key) error {
	f.Reconnects = append(f.Reconnects, k)
	return nil
}

func (f *Gateway) SetPeers(p []gateway.Peer) error       { f.Peers = p; return nil }
func (f *Gateway) Status() ([]gateway.PeerStatus, error) { return nil, nil }
func (f *Gateway) Close()                                {}

// Allowed returns the prefixes the peer of key k is routed (none when it
// is no peer).
func (f *Gateway) Allowed(k wgtypes.Key) []netip.Prefix {
	for _, p := range f.Peers {
		if p.PublicKey == k {
			return p.AllowedIPs
		}
	}
	return nil
}

// PublicKey returns the public key of a new private key.
func PublicKey() wgtypes.Key {
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		panic(err) // the system's random source failed
	}
	return k.PublicKey()
}

// Prefixes parses CIDRs that are known to be valid.
func Prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}
