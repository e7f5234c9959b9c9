package child

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/tunnel"
)

// The node's own kubelet port on the parent's proxy (tunnel mode): asked
// for before the node registers, which registers with it.

// nodePortRecheck is how often an agent in tunnel mode asks the proxy for
// its node's kubelet port again, besides each time its tunnel comes up.
const nodePortRecheck = time.Minute

// askNodePort asks the proxy for the node's own kubelet port (tunnel
// mode) and advertises it; it keeps the shared port when the proxy gives
// none, and reports whether the answer was final (false: ask again).
func (k *kubeletAPI) askNodePort(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ep, err := tunnel.NodeEndpoint(ctx, k.tunnel)
	logger := klog.FromContext(ctx)
	switch {
	case errors.Is(err, tunnel.ErrNoNodePort):
		logger.V(2).Info("The parent's proxy serves this node on its shared kubelet port: node-level routes (stats, kubectl top) are not served", "reason", err)
		ep = k.proxy[api.ClusterInfoProxyKubeletEndpoint]
	case err != nil:
		logger.Info("Cannot get this node's kubelet port from the parent's proxy yet; advertising its shared port meanwhile", "err", err)
		return false
	}
	k.mu.Lock()
	changed := k.endpoint != ep
	k.endpoint = ep
	notify := k.advertised
	k.mu.Unlock()
	k.answeredOnce.Do(func() { close(k.answered) })
	if changed && notify != nil {
		logger.Info("Advertising the kubelet endpoint the parent's proxy gave this node", "endpoint", ep)
		notify()
	}
	return true
}

// askEarly asks the proxy for the node's own port at once (tunnel mode),
// while the forwarder is built and the tunnel comes up, so that the node
// can register with it (nodePortAnswered). The tunnel's Connected asks
// again, and keeps asking while the answer is not final.
func (k *kubeletAPI) askEarly(ctx context.Context) {
	if k == nil || k.mode != KubeletAPITunnel {
		return
	}
	go k.askNodePort(ctx)
}

// registered arms notify (a status report) for each change of the
// endpoint from now on, and calls it at once if the endpoint changed
// since node was built.
func (k *kubeletAPI) registered(node *corev1.Node, notify func()) {
	k.mu.Lock()
	k.advertised = notify
	k.mu.Unlock()
	if _, port := k.hostPort(); node != nil && port != node.Status.DaemonEndpoints.KubeletEndpoint.Port {
		notify()
	}
}

// dropOwnPort is called when the node could not register (err): in
// tunnel mode with a port of its own, the node goes back to the proxy's
// shared port, which the parent's policy always allows, and reports
// whether it did (the registration is then tried again at once). The port
// is asked for again when the tunnel next comes up and every
// nodePortRecheck.
func (k *kubeletAPI) dropOwnPort(ctx context.Context, err error) bool {
	shared := k.proxy[api.ClusterInfoProxyKubeletEndpoint]
	k.mu.Lock()
	own := k.mode == KubeletAPITunnel && shared != "" && k.endpoint != shared
	if own {
		k.endpoint = shared
	}
	k.mu.Unlock()
	if own {
		klog.FromContext(ctx).Info("The node could not register with its own kubelet port; registering with the proxy's shared port", "endpoint", shared, "err", err)
	}
	return own
}

// nodePortWait bounds how long a node in tunnel mode waits, before it
// registers, for the proxy to give it its own kubelet port.
const nodePortWait = 2 * time.Second

// nodePortAnswered is closed once the proxy answered about the node's own
// port; nil (never waited for) outside tunnel mode.
func (k *kubeletAPI) nodePortAnswered() <-chan struct{} {
	if k == nil || k.mode != KubeletAPITunnel {
		return nil
	}
	return k.answered
}
