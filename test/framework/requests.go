package framework

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nestlet/nestlet/launcher"
)

// Requests reads the API server's apiserver_request_total and returns the
// number of requests so far by "resource[/subresource]-VERB" (e.g.
// "pods/status-PATCH", "nodes-LIST"), with "-<code>" added for those that
// failed ("pods/status-PUT-409"). Benchmarks subtract two readings.
func Requests(ctx context.Context, c *launcher.Cluster) (map[string]float64, error) {
	fams, err := apiServerMetrics(ctx, c)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		r := l["resource"]
		if l["subresource"] != "" {
			r += "/" + l["subresource"]
		}
		key := r + "-" + l["verb"]
		if code := l["code"]; !strings.HasPrefix(code, "2") && code != "101" {
			key += "-" + code // failed: a conflict is 409
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out, nil
}

// apiServerMetrics reads the cluster's API server's /metrics.
func apiServerMetrics(ctx context.Context, c *launcher.Cluster) (map[string]*dto.MetricFamily, error) {
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(bytes.NewReader(body))
}

// IsWrite reports whether a key of Requests is a write (not GET, LIST,
// WATCH or CONNECT).
func IsWrite(key string) bool {
	return !slices.ContainsFunc([]string{"-GET", "-LIST", "-WATCH", "-CONNECT"}, func(v string) bool { return strings.Contains(key, v) })
}

// FlowControlWait returns, per priority level of the cluster's API priority
// and fairness, the seconds requests have waited in its queues so far (the
// sum of apiserver_flowcontrol_request_wait_duration_seconds, executed or
// not): where a busy API server holds requests back before serving them.
func FlowControlWait(ctx context.Context, c *launcher.Cluster) (map[string]float64, error) {
	fams, err := apiServerMetrics(ctx, c)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range fams["apiserver_flowcontrol_request_wait_duration_seconds"].GetMetric() {
		for _, p := range m.GetLabel() {
			if p.GetName() == "priority_level" {
				out[p.GetValue()] += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out, nil
}

// DispatchedByFlowSchema returns, per "<flow schema>/<priority level>" of
// the cluster's API priority and fairness, how many requests its API
// server has dispatched so far.
func DispatchedByFlowSchema(ctx context.Context, c *launcher.Cluster) (map[string]float64, error) {
	fams, err := apiServerMetrics(ctx, c)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range fams["apiserver_flowcontrol_dispatched_requests_total"].GetMetric() {
		var schema, level string
		for _, p := range m.GetLabel() {
			switch p.GetName() {
			case "flow_schema":
				schema = p.GetValue()
			case "priority_level":
				level = p.GetValue()
			}
		}
		out[schema+"/"+level] += m.GetCounter().GetValue()
	}
	return out, nil
}

// Histogram is a cumulative Prometheus histogram: Counts[i] observations
// at or under Bounds[i] (+Inf last).
type Histogram struct {
	Sum, Count float64
	Bounds     []float64
	Counts     []float64
}

// Sub returns what h observed since was (the same buckets).
func (h Histogram) Sub(was Histogram) Histogram {
	d := Histogram{Sum: h.Sum - was.Sum, Count: h.Count - was.Count, Bounds: h.Bounds, Counts: slices.Clone(h.Counts)}
	for i := range d.Counts {
		if i < len(was.Counts) {
			d.Counts[i] -= was.Counts[i]
		}
	}
	return d
}

// Add returns the observations of h and o together (the same buckets; a
// Histogram with none takes o's).
func (h Histogram) Add(o Histogram) Histogram {
	if h.Bounds == nil {
		h.Bounds, h.Counts = o.Bounds, make([]float64, len(o.Counts))
	}
	s := Histogram{Sum: h.Sum + o.Sum, Count: h.Count + o.Count, Bounds: h.Bounds, Counts: slices.Clone(h.Counts)}
	for i := range min(len(s.Counts), len(o.Counts)) {
		s.Counts[i] += o.Counts[i]
	}
	return s
}

// Quantile returns the upper bound of the bucket holding quantile q (an
// upper estimate: the histogram keeps no finer detail), +Inf when it is
// past the last bound, NaN when nothing was observed (as Median).
func (h Histogram) Quantile(q float64) float64 {
	if h.Count <= 0 {
		return math.NaN()
	}
	for i, c := range h.Counts {
		if c >= q*h.Count {
			return h.Bounds[i]
		}
	}
	return math.Inf(1)
}

// RequestSeconds returns the cluster's API server's
// apiserver_request_duration_seconds for one resource and verb (every
// other label summed): the time from a request's arrival to its answer,
// priority-and-fairness queueing included.
func RequestSeconds(ctx context.Context, c *launcher.Cluster, resource, verb string) (Histogram, error) {
	fams, err := apiServerMetrics(ctx, c)
	if err != nil {
		return Histogram{}, err
	}
	var h Histogram
	for _, m := range fams["apiserver_request_duration_seconds"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["resource"] != resource || l["verb"] != verb || l["subresource"] != "" {
			continue
		}
		hist := m.GetHistogram()
		series := Histogram{Sum: hist.GetSampleSum(), Count: float64(hist.GetSampleCount())}
		for _, b := range hist.GetBucket() {
			series.Bounds = append(series.Bounds, b.GetUpperBound())
			series.Counts = append(series.Counts, float64(b.GetCumulativeCount()))
		}
		series.Bounds = append(series.Bounds, math.Inf(1))
		series.Counts = append(series.Counts, series.Count)
		h = h.Add(series)
	}
	return h, nil
}
