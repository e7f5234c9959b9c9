package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/gateway"
)

// handshakeFresh is how old the last handshake of a live tunnel may be:
// WireGuard renews its session every two minutes while packets flow (the
// keepalives among them), so an older one means nothing came through.
const handshakeFresh = 3 * time.Minute

// peerNames returns each peer's name by key: a child's virtual node, or
// "parent/" and the Target's name.
func (t *tunnels) peerNames() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for name, p := range t.children {
		out[p.PublicKey.String()] = name
	}
	for name, p := range t.parents {
		out[p.PublicKey.String()] = "parent/" + name
	}
	return out
}

// parentStatus returns the tunnel to the parent of Target target: the
// peer configured (nil when the parent publishes no gateway here) and what
// the gateway knows of it.
func (t *tunnels) parentStatus(target string) (*gateway.Peer, *gateway.PeerStatus, error) {
	t.mu.Lock()
	p, ok := t.parents[target]
	t.mu.Unlock()
	if !ok {
		return nil, nil, nil
	}
	all, err := t.gw.Status()
	if err != nil {
		return &p, nil, err
	}
	for i := range all {
		if all[i].PublicKey == p.PublicKey {
			return &p, &all[i], nil
		}
	}
	return &p, nil, nil
}

// tunnelCondition is ConditionTunnel of a Target from its tunnel's state.
func tunnelCondition(peer *gateway.Peer, st *gateway.PeerStatus, now time.Time) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionTunnel}
	switch {
	case peer == nil:
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNoParentGateway
		c.Message = "the parent publishes no gateway on this cluster's virtual node (yet): its agent runs without --gateway, or has not decorated the node; pods here reach no pod of the other clusters"
	case !peer.Endpoint.IsValid():
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonNoGatewayEndpoint
		c.Message = "the parent's gateway publishes no endpoint: give the parent's agent --gateway-endpoint (an address and UDP port this cluster reaches)"
	case st != nil && !st.LastHandshake.IsZero() && now.Sub(st.LastHandshake) < handshakeFresh:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonTunnelUp
		c.Message = fmt.Sprintf("tunnel to the parent's gateway at %s up, routing %d pod CIDRs of other clusters through it", peer.Endpoint, len(st.AllowedIPs))
	default:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonTunnelDown
		c.Message = fmt.Sprintf("no handshake with the parent's gateway at %s for %s: check that UDP port %d of that address is reachable from this cluster, and that the parent's agent runs its gateway there", peer.Endpoint, handshakeFresh, peer.Endpoint.Port())
	}
	return c
}

// tunnelStates is what the child tells its parent of the tunnel between
// them, by reason of ConditionTunnel (api.AnnotationGatewayTunnel).
var tunnelStates = map[string]string{
	v1alpha1.ReasonTunnelUp:          "up",
	v1alpha1.ReasonTunnelDown:        "down",
	v1alpha1.ReasonNoGatewayEndpoint: "no endpoint",
	v1alpha1.ReasonNoParentGateway:   "no gateway in the parent",
}

// statsEvery is how often, at most, a child refreshes its tunnel's
// counters on its virtual node while traffic flows.
const statsEvery = time.Minute

// reportTunnel keeps ConditionTunnel of the run's Target in step with its
// tunnel, every few seconds until ctx ends, and the tunnel's state and
// counters on the virtual node (publish: at each change of the state and
// at most every statsEvery while bytes flow), where `nestctl tree` in the
// parent shows them.
func (t *tunnels) reportTunnel(ctx context.Context, clk clock.WithTicker, status *runStatus, publish func(context.Context, string, *api.TunnelStats) error) {
	tick := clk.NewTicker(5 * time.Second)
	defer tick.Stop()
	published := ""
	var last api.TunnelStats
	for {
		peer, st, err := t.parentStatus(status.target.Name)
		if err == nil {
			now := clk.Now()
			cond := tunnelCondition(peer, st, now)
			status.set(ctx, cond)
			stats := tunnelStats(st, now)
			state := tunnelStates[cond.Reason]
			moved := stats.Received != last.Received || stats.Sent != last.Sent
			if state != published || (moved && now.Sub(last.At) >= statsEvery) {
				if err := publish(ctx, state, &stats); err == nil {
					published, last = state, stats
				} else if ctx.Err() == nil {
					klog.FromContext(ctx).V(2).Info("Publishing the tunnel's state", "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// tunnelStats are st's counters read at now (zero without st).
func tunnelStats(st *gateway.PeerStatus, now time.Time) api.TunnelStats {
	out := api.TunnelStats{At: now.UTC().Truncate(time.Second)}
	if st == nil {
		return out
	}
	out.Received, out.Sent = st.RxBytes, st.TxBytes
	if !st.LastHandshake.IsZero() {
		at := st.LastHandshake.UTC().Truncate(time.Second)
		out.LastHandshake = &at
	}
	return out
}

// tunnelMetrics exports each tunnel's state, read from the gateway when
// scraped.
type tunnelMetrics struct {
	t                           *tunnels
	handshake, rxBytes, txBytes *prometheus.Desc
}

func newTunnelMetrics(t *tunnels) *tunnelMetrics {
	labels := []string{"peer"}
	return &tunnelMetrics{t: t,
		handshake: prometheus.NewDesc("nestlet_gateway_last_handshake_timestamp_seconds", "Time of the last handshake with the peer (0: none yet).", labels, nil),
		rxBytes:   prometheus.NewDesc("nestlet_gateway_received_bytes_total", "Bytes received from the peer through its tunnel.", labels, nil),
		txBytes:   prometheus.NewDesc("nestlet_gateway_sent_bytes_total", "Bytes sent to the peer through its tunnel.", labels, nil),
	}
}

func (m *tunnelMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.handshake
	ch <- m.rxBytes
	ch <- m.txBytes
}

func (m *tunnelMetrics) Collect(ch chan<- prometheus.Metric) {
	all, err := m.t.gw.Status()
	if err != nil {
		return
	}
	names := m.t.peerNames()
	for _, p := range all {
		name := names[p.PublicKey.String()]
		if name == "" {
			continue
		}
		var at float64
		if !p.LastHandshake.IsZero() {
			at = float64(p.LastHandshake.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(m.handshake, prometheus.GaugeValue, at, name)
		ch <- prometheus.MustNewConstMetric(m.rxBytes, prometheus.CounterValue, float64(p.RxBytes), name)
		ch <- prometheus.MustNewConstMetric(m.txBytes, prometheus.CounterValue, float64(p.TxBytes), name)
	}
}

// publishTunnel writes the tunnel's state and counters on virtual node
// name (api.AnnotationGatewayTunnel, api.AnnotationGatewayTunnelStats).
func publishTunnel(nodeClient kubernetes.Interface, name string) func(context.Context, string, *api.TunnelStats) error {
	return func(ctx context.Context, state string, stats *api.TunnelStats) error {
		raw, err := json.Marshal(stats)
		if err != nil {
			return err
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			api.AnnotationGatewayTunnel: state, api.AnnotationGatewayTunnelStats: string(raw)}}})
		if err != nil {
			return err
		}
		_, err = nodeClient.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		return err
	}
}
