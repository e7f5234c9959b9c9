package peers

import (
	"context"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/klog/v2"
)

// Key rotation. The gateway's key changes with each renewal of a node
// certificate (a key lives no longer than the identity that published
// it), and at each start of the agent (it is never stored):
//
//  1. Rotate: the gateway takes a new key; every virtual node of this
//     cluster in its parents publishes it (keyListeners), and every child
//     is told this gateway's new key (changed: decorated again).
//  2. Each parent's decorator makes the new key its peer for this child
//     and says so on the virtual node (api.GatewayParent.PeerKey).
//  3. Reading it there (acknowledged), this cluster makes its parent's
//     peer anew, which starts the handshake at once: the peer is down
//     for about two watch round trips instead of WireGuard's 5-second
//     retry. A child whose parent rotated dials its parent with the
//     parent's new key as soon as it reads it, the same way (a changed
//     peer is a new one).

// Rotate gives the gateway a new key and publishes it.
func (t *Peers) Rotate(ctx context.Context) error {
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		return err
	}
	if err := t.gw.SetPrivateKey(key); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Rotated the gateway's key", "publicKey", key.PublicKey().String())
	t.mu.Lock()
	listeners := make([]func(), 0, len(t.keyListeners))
	for _, f := range t.keyListeners {
		listeners = append(listeners, f)
	}
	changed := t.changed
	t.mu.Unlock()
	for _, f := range listeners {
		f()
	}
	if changed != nil {
		go changed()
	}
	return nil
}

// OnKeyChange calls f, until the returned function is called, each time
// the gateway's key changes: the run of Target target publishes it.
func (t *Peers) OnKeyChange(target string, f func()) (stop func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.keyListeners[target] = f
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.keyListeners, target)
		delete(t.acked, target)
	}
}

// acknowledged opens the peer of the parent of Target target again when
// the parent newly says it knows this gateway's current key.
func (t *Peers) acknowledged(ctx context.Context, target string, peerKey string) {
	own := t.PublicKey()
	t.mu.Lock()
	p, ok := t.parents[target]
	fresh := ok && peerKey == own && t.acked[target] != own
	if ok {
		t.acked[target] = peerKey
	}
	t.mu.Unlock()
	if !fresh {
		return
	}
	if err := t.gw.Reconnect(p.PublicKey); err != nil {
		klog.FromContext(ctx).V(2).Info("Opening the peer of the parent again", "target", target, "err", err)
	}
}
