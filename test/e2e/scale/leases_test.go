package scale

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"k8s.io/client-go/tools/metrics"
)

// The hollow leaves' agents run in this process, so every Lease update
// its client-go sends is one of theirs: a node lease renewed in a field.
// Counting them here, beside what the fields' API servers count, tells
// a renewal the leaves did not send (this process starved) from one the
// fields were slow to take (the latency of those sent).
var renewals = &leaseRenewals{}

// leaseRenewInterval is how often an agent renews its node's Lease:
// virtual-kubelet's quarter of the agent's default 40-second duration.
const leaseRenewInterval = 10 * time.Second

func init() {
	// client-go takes the first registration only: nothing else in this
	// test binary registers (k8s.io/component-base's restclient metrics
	// are not linked in).
	metrics.Register(metrics.RegisterOpts{RequestLatency: renewals})
}

// leaseRenewals records how long each Lease update that got an answer
// waited for it. (client-go gives the path as a template, without the
// Lease's name: renewals cannot be told apart by node here.)
type leaseRenewals struct {
	mu      sync.Mutex
	latency []time.Duration
}

// Observe implements metrics.LatencyMetric.
func (r *leaseRenewals) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	if verb != "PUT" || !strings.Contains(u.Path, "/leases/") {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency = append(r.latency, latency)
}

// renewalWindow is what renewals recorded after a mark: how long each
// renewal answered meanwhile waited for its answer.
type renewalWindow struct {
	latency []time.Duration
}

// mark returns a position in the record, for since.
func (r *leaseRenewals) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.latency)
}

// since returns what was recorded after mark.
func (r *leaseRenewals) since(mark int) renewalWindow {
	r.mu.Lock()
	defer r.mu.Unlock()
	return renewalWindow{latency: append([]time.Duration(nil), r.latency[mark:]...)}
}

// The recorder counts Lease updates only, and nothing before a mark.
func TestLeaseRenewals(t *testing.T) {
	r := &leaseRenewals{}
	lease := url.URL{Scheme: "https", Host: "field-0:6443", Path: "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"}
	r.Observe(t.Context(), "PUT", lease, time.Millisecond)
	mark := r.mark()
	require.Equal(t, 1, mark)
	r.Observe(t.Context(), "GET", lease, time.Millisecond)
	r.Observe(t.Context(), "POST", url.URL{Host: "field-0:6443", Path: "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"}, time.Millisecond)
	r.Observe(t.Context(), "PUT", url.URL{Host: "field-0:6443", Path: "/api/v1/nodes/{name}/status"}, time.Millisecond)
	r.Observe(t.Context(), "PUT", lease, 2*time.Millisecond)
	r.Observe(t.Context(), "PUT", lease, 3*time.Millisecond)
	w := r.since(mark)
	require.Equal(t, []time.Duration{2 * time.Millisecond, 3 * time.Millisecond}, w.latency, "lease updates only, after the mark")
}
