package peers

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

// handshakeFresh is how old the last handshake of a live peer may be:
// WireGuard renews its session every two minutes while packets flow (the
// keepalives among them), so an older one means nothing came through.
const handshakeFresh = 3 * time.Minute

// peerNames returns each peer's name by key: a child's virtual node, or
// "parent/" and the Target's name.
func (t *Peers) peerNames() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for name, p := range t.children {
		out[p.PublicKey.String()] = name
	}
	for name, p := range t.parents {
		out[p.PublicKey.String()] = "parent/" + name
	}
	t.directNamesLocked(out)
	return out
}

// parentStatus returns the peer of the parent of Target target: the
// peer configured (nil when the parent publishes no gateway here) and what
// the gateway knows of it.
func (t *Peers) parentStatus(target string) (*gateway.Peer, *gateway.PeerStatus, error) {
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

// condition is the Target's ConditionTunnel from its parent peer's state.
func condition(peer *gateway.Peer, st *gateway.PeerStatus, now time.Time) metav1.Condition {
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
		c.Message = fmt.Sprintf("peer link to the parent's gateway at %s up, routing %d pod CIDRs of other clusters through it", peer.Endpoint, len(st.AllowedIPs))
	default:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonTunnelDown
		c.Message = fmt.Sprintf("no handshake with the parent's gateway at %s for %s: check that UDP port %d of that address is reachable from this cluster, and that the parent's agent runs its gateway there", peer.Endpoint, handshakeFresh, peer.Endpoint.Port())
	}
	return c
}

// states is what the child tells its parent of the peer link between
// them, by reason of ConditionTunnel (api.AnnotationGatewayTunnel).
var states = map[string]string{
	v1alpha1.ReasonTunnelUp:          "up",
	v1alpha1.ReasonTunnelDown:        "down",
	v1alpha1.ReasonNoGatewayEndpoint: "no endpoint",
	v1alpha1.ReasonNoParentGateway:   "no gateway in the parent",
}

// statsEvery is how often, at most, a child refreshes its peer's
// counters on its virtual node while traffic flows.
const statsEvery = time.Minute

// ReportParent keeps ConditionTunnel of Target target in step with the
// peer of its parent (set writes it), every few seconds until ctx ends,
// and the peer's state and counters on the virtual node (publish: at each
// change of the state and at most every statsEvery while bytes flow),
// where `nestctl tree` in the parent shows them.
func (t *Peers) ReportParent(ctx context.Context, clk clock.WithTicker, target string, set func(context.Context, ...metav1.Condition), publish func(context.Context, string, *api.PeerStats) error) {
	tick := clk.NewTicker(5 * time.Second)
	defer tick.Stop()
	published := ""
	var last api.PeerStats
	for {
		peer, st, err := t.parentStatus(target)
		if err == nil {
			now := clk.Now()
			cond := condition(peer, st, now)
			set(ctx, cond)
			stats := peerStats(st, now)
			state := states[cond.Reason]
			moved := stats.Received != last.Received || stats.Sent != last.Sent
			timed := last.RTTMicroseconds == 0 && stats.RTTMicroseconds > 0 // the first round trip timed
			if state != published || timed || (moved && now.Sub(last.At) >= statsEvery) {
				if err := publish(ctx, state, &stats); err == nil {
					published, last = state, stats
				} else if ctx.Err() == nil {
					klog.FromContext(ctx).V(2).Info("Publishing the parent peer's state", "err", err)
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

// peerStats are st's counters read at now (zero without st).
func peerStats(st *gateway.PeerStatus, now time.Time) api.PeerStats {
	out := api.PeerStats{At: now.UTC().Truncate(time.Second)}
	if st == nil {
		return out
	}
	out.Received, out.Sent = st.RxBytes, st.TxBytes
	out.RTTMicroseconds = st.RTT.Microseconds()
	if !st.LastHandshake.IsZero() {
		at := st.LastHandshake.UTC().Truncate(time.Second)
		out.LastHandshake = &at
	}
	return out
}

// metrics exports each peer's state, read from the gateway when scraped.
type metrics struct {
	t                                        *Peers
	handshake, rxBytes, txBytes, rtt, direct *prometheus.Desc
}

// Collector returns the Prometheus collector of the peers' state
// (nestlet_gateway_*).
func (t *Peers) Collector() prometheus.Collector {
	labels := []string{"peer"}
	return &metrics{t: t,
		handshake: prometheus.NewDesc("nestlet_gateway_last_handshake_timestamp_seconds", "Time of the last handshake with the peer (0: none yet).", labels, nil),
		rxBytes:   prometheus.NewDesc("nestlet_gateway_received_bytes_total", "Bytes received from the peer.", labels, nil),
		txBytes:   prometheus.NewDesc("nestlet_gateway_sent_bytes_total", "Bytes sent to the peer.", labels, nil),
		rtt:       prometheus.NewDesc("nestlet_gateway_rtt_seconds", "Round trip to the peer's gateway, timed at the last handshake (absent when unknown: WireGuard in the kernel, or no handshake yet).", labels, nil),
		direct: prometheus.NewDesc("nestlet_gateway_path_direct", "1 while the traffic to the cluster of a direct peer (peer=\"direct/<cluster>\") takes the direct path, 0 while it goes through the tree.",
			[]string{"peer", "state"}, nil),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.handshake
	ch <- m.rxBytes
	ch <- m.txBytes
	ch <- m.rtt
	ch <- m.direct
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
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
		if p.RTT > 0 {
			ch <- prometheus.MustNewConstMetric(m.rtt, prometheus.GaugeValue, p.RTT.Seconds(), name)
		}
	}
	for name, state := range m.t.directState() {
		var up float64
		if state == api.DirectUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(m.direct, prometheus.GaugeValue, up, name, state)
	}
}

// PublishOnNode writes the parent peer's state and counters on virtual
// node name (api.AnnotationGatewayTunnel, api.AnnotationGatewayTunnelStats).
func PublishOnNode(nodeClient kubernetes.Interface, name string) func(context.Context, string, *api.PeerStats) error {
	return func(ctx context.Context, state string, stats *api.PeerStats) error {
		raw, err := json.Marshal(stats)
		if err != nil {
			return err
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			api.AnnotationGatewayTunnel: state, api.AnnotationGatewayTunnelStats: string(raw)}}})
		if err != nil {
			return err
		}
		_, err = nodeClient.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManager})
		return err
	}
}
