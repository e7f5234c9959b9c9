package kubeletapi

import (
	"bytes"
	"context"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// MetricsResource is the virtual node's /metrics/resource (what
// metrics-server scrapes): each node of this cluster's resource metrics,
// read through this cluster's API server, with the node-level series
// (node_*) added up into one, the pod and container series kept only for
// delegates of this virtual node's pods, relabelled with the parent pod's
// namespace and name, and the rest (scrape_error, ...) dropped. A node that
// cannot be read is left out.
func (s *Server) MetricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	var scraped []map[string]*dto.MetricFamily
	parents, err := s.eachNode(ctx, "metrics/resource", func(body []byte) error {
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			return err
		}
		scraped = append(scraped, families)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return mergeMetrics(scraped, parents), nil
}

// mergeMetrics combines the resource metrics of several nodes as
// MetricsResource describes.
func mergeMetrics(scraped []map[string]*dto.MetricFamily, parents map[string]*corev1.Pod) []*dto.MetricFamily {
	out := map[string]*dto.MetricFamily{}
	family := func(src *dto.MetricFamily) *dto.MetricFamily {
		f, ok := out[src.GetName()]
		if !ok {
			f = &dto.MetricFamily{Name: src.Name, Help: src.Help, Type: src.Type}
			out[src.GetName()] = f
		}
		return f
	}
	for _, families := range scraped {
		for name, src := range families {
			switch {
			case strings.HasPrefix(name, "node_"):
				f := family(src)
				for _, m := range src.Metric {
					if len(f.Metric) == 0 {
						f.Metric = append(f.Metric, &dto.Metric{TimestampMs: m.TimestampMs})
					}
					sum := f.Metric[0]
					addValue(sum, m)
					if m.GetTimestampMs() > sum.GetTimestampMs() {
						sum.TimestampMs = m.TimestampMs
					}
				}
			case strings.HasPrefix(name, "pod_"), strings.HasPrefix(name, "container_"):
				for _, m := range src.Metric {
					labels, ok := relabel(m.Label, parents)
					if !ok {
						continue
					}
					c := &dto.Metric{Label: labels, Gauge: m.Gauge, Counter: m.Counter, Untyped: m.Untyped, TimestampMs: m.TimestampMs}
					f := family(src)
					f.Metric = append(f.Metric, c)
				}
			}
		}
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	res := make([]*dto.MetricFamily, 0, len(names))
	for _, n := range names {
		if len(out[n].Metric) > 0 {
			res = append(res, out[n])
		}
	}
	return res
}

// relabel returns the labels of a pod or container series under the
// parent pod's namespace and name, or false when the pod is not a delegate
// of this virtual node.
func relabel(labels []*dto.LabelPair, parents map[string]*corev1.Pod) ([]*dto.LabelPair, bool) {
	var ns, pod string
	for _, l := range labels {
		switch l.GetName() {
		case "namespace":
			ns = l.GetValue()
		case "pod":
			pod = l.GetValue()
		}
	}
	p, ok := parents[ns+"/"+pod]
	if !ok {
		return nil, false
	}
	out := make([]*dto.LabelPair, 0, len(labels))
	for _, l := range labels {
		v := l.GetValue()
		switch l.GetName() {
		case "namespace":
			v = p.Namespace
		case "pod":
			v = p.Name
		}
		out = append(out, &dto.LabelPair{Name: l.Name, Value: ptr.To(v)})
	}
	return out, true
}

// addValue adds m's gauge, counter or untyped value to sum.
func addValue(sum, m *dto.Metric) {
	switch {
	case m.Gauge != nil:
		if sum.Gauge == nil {
			sum.Gauge = &dto.Gauge{Value: ptr.To(0.0)}
		}
		sum.Gauge.Value = ptr.To(sum.Gauge.GetValue() + m.Gauge.GetValue())
	case m.Counter != nil:
		if sum.Counter == nil {
			sum.Counter = &dto.Counter{Value: ptr.To(0.0)}
		}
		sum.Counter.Value = ptr.To(sum.Counter.GetValue() + m.Counter.GetValue())
	case m.Untyped != nil:
		if sum.Untyped == nil {
			sum.Untyped = &dto.Untyped{Value: ptr.To(0.0)}
		}
		sum.Untyped.Value = ptr.To(sum.Untyped.GetValue() + m.Untyped.GetValue())
	}
}
