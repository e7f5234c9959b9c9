package forward

import "github.com/prometheus/client_golang/prometheus"

// Metrics of forwarding, labelled by Target.
type Metrics struct {
	forwarded       *prometheus.CounterVec
	latency         *prometheus.HistogramVec
	statusUpdates   *prometheus.CounterVec
	errors          *prometheus.CounterVec
	eventsReflected *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (none when nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nestlet_pods_forwarded_total", Help: "Delegates created in this cluster for pods of a parent.",
		}, []string{"target"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nestlet_forward_latency_seconds",
			Help:    "Time from the agent receiving a parent pod to its delegate being created (dependencies copied).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"target"}),
		statusUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nestlet_pod_status_updates_total", Help: "Pod statuses sent to a parent.",
		}, []string{"target"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nestlet_forward_errors_total", Help: "Forwarding errors and pods failed here, by reason.",
		}, []string{"target", "reason"}),
		eventsReflected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nestlet_events_reflected_total", Help: "Warning events about delegates recorded again on their parent pods.",
		}, []string{"target"}),
	}
	if reg != nil {
		reg.MustRegister(m.forwarded, m.latency, m.statusUpdates, m.errors, m.eventsReflected)
	}
	return m
}
