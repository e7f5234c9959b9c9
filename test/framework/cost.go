package framework

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/launcher"
)

// ClusterCost is what one cluster of an environment has used: CPU time by
// component (kube-apiserver, kube-controller-manager, kube-scheduler, kwok,
// kubelet, agent, proxy, ...), and the requests its API server served,
// all and writes (watches left out), and by resource and verb (Requests'
// keys, watches included).
type ClusterCost struct {
	CPU              map[string]time.Duration
	Requests, Writes float64
	ByKind           map[string]float64
	// RequestsUnread: the API server did not answer for its counters
	// (MeasureCostsOfBusy), so Requests and Writes are unknown, not 0.
	RequestsUnread bool
}

// TotalCPU is the CPU time of every component of the cluster.
func (c ClusterCost) TotalCPU() time.Duration {
	var t time.Duration
	for _, d := range c.CPU {
		t += d
	}
	return t
}

// Costs holds a ClusterCost per cluster name; the shared etcd of the
// environment is under SharedEtcd, with CPU only.
type Costs map[string]ClusterCost

// SharedEtcd is the key of the environment's shared etcd in Costs.
const SharedEtcd = "shared-etcd" // a benchmark metric unit: no whitespace

// MeasureCosts reads, now, every cluster's cost so far. The agent and proxy
// of a cluster are the environment's processes named <cluster>-nestlet and
// <cluster>-nestlet-proxy.
func MeasureCosts(ctx context.Context, e *launcher.Environment) (Costs, error) {
	out := measureCPU(e)
	for _, c := range e.Clusters() {
		reqs, err := Requests(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("requests of %s: %w", c.Name, err)
		}
		out.addRequests(c.Name, reqs)
	}
	return out, nil
}

// MeasureCostsOfBusy is MeasureCosts for clusters that may be too busy to
// answer at once (a run that did not keep up): CPU is read now, and every
// API server is asked for its counters at the same time, each again for up
// to patience, so that the whole read takes at most about patience however
// many clusters there are; a cluster whose API server never answers has
// RequestsUnread set instead of an error, so that what was measured is
// still reported.
func MeasureCostsOfBusy(ctx context.Context, e *launcher.Environment, patience time.Duration, logf func(string, ...any)) Costs {
	out := measureCPU(e)
	clusters := e.Clusters()
	read := make([]map[string]float64, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() {
			reqs, err := RequestsWithin(ctx, c, patience, logf)
			if err != nil {
				logf("requests of %s: not read within %s; its request figures are left out", c.Name, patience)
				return
			}
			read[i] = reqs
		})
	}
	wg.Wait()
	for i, c := range clusters {
		if read[i] == nil {
			cost := out[c.Name]
			cost.RequestsUnread = true
			out[c.Name] = cost
			continue
		}
		out.addRequests(c.Name, read[i])
	}
	return out
}

// RequestsWithin is Requests asked again every 5 s for up to patience, for
// an API server too busy to answer at once (a TLS handshake timing out).
func RequestsWithin(ctx context.Context, c *launcher.Cluster, patience time.Duration, logf func(string, ...any)) (map[string]float64, error) {
	var reqs map[string]float64
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, patience, true, func(ctx context.Context) (bool, error) {
		var err error
		if reqs, err = Requests(ctx, c); err != nil {
			logf("requests of %s: %v (asking again)", c.Name, err)
		}
		return err == nil, nil
	})
	return reqs, err
}

// measureCPU reads every cluster's CPU time so far, and the shared etcd's.
func measureCPU(e *launcher.Environment) Costs {
	out := Costs{}
	for _, c := range e.Clusters() {
		cost := ClusterCost{CPU: map[string]time.Duration{}}
		for _, p := range c.Processes() {
			if t, err := CPUTime(p); err == nil {
				cost.CPU[p.Name] += t
			}
		}
		out[c.Name] = cost
	}
	etcd := ClusterCost{CPU: map[string]time.Duration{}}
	for _, p := range e.Processes() {
		t, err := CPUTime(p)
		if err != nil {
			continue
		}
		if cluster, component, ok := launcher.ProcessComponent(p.Name); ok {
			addCPU(out, cluster, component, t)
		} else if p.Name == "etcd" {
			etcd.CPU["etcd"] += t
		}
	}
	out[SharedEtcd] = etcd
	return out
}

// addRequests adds a cluster's request counters (Requests) to its cost.
func (c Costs) addRequests(name string, reqs map[string]float64) {
	cost := c[name]
	cost.ByKind = maps.Clone(reqs)
	for k, n := range reqs {
		if strings.Contains(k, "-WATCH") {
			continue // one per watch opened, whatever it carries
		}
		cost.Requests += n
		if IsWrite(k) {
			cost.Writes += n
		}
	}
	c[name] = cost
}

func addCPU(c Costs, cluster, component string, t time.Duration) {
	cost, ok := c[cluster]
	if !ok {
		return
	}
	cost.CPU[component] += t
}

// Sub returns c minus an earlier reading.
func (c Costs) Sub(before Costs) Costs {
	out := Costs{}
	for name, now := range c {
		was := before[name]
		d := ClusterCost{CPU: map[string]time.Duration{}, Requests: now.Requests - was.Requests, Writes: now.Writes - was.Writes,
			RequestsUnread: now.RequestsUnread || was.RequestsUnread}
		for k, t := range now.CPU {
			d.CPU[k] = t - was.CPU[k]
		}
		if !d.RequestsUnread && now.ByKind != nil {
			d.ByKind = map[string]float64{}
			for k, n := range now.ByKind {
				d.ByKind[k] = n - was.ByKind[k]
			}
		}
		out[name] = d
	}
	return out
}

// Sum returns the costs of the clusters among names added together: CPU
// by component, requests and writes, and requests by kind; unread if any
// of them is.
func (c Costs) Sum(names []string) ClusterCost {
	out := ClusterCost{CPU: map[string]time.Duration{}, ByKind: map[string]float64{}}
	for _, n := range names {
		cost := c[n]
		for k, t := range cost.CPU {
			out.CPU[k] += t
		}
		for k, v := range cost.ByKind {
			out.ByKind[k] += v
		}
		out.Requests += cost.Requests
		out.Writes += cost.Writes
		out.RequestsUnread = out.RequestsUnread || cost.RequestsUnread
	}
	return out
}

// Busiest returns the cluster among names with the most CPU time.
func (c Costs) Busiest(names []string) string {
	best := ""
	for _, n := range names {
		if best == "" || c[n].TotalCPU() > c[best].TotalCPU() {
			best = n
		}
	}
	return best
}

// Report prints the costs as benchmark metrics, per cluster of names:
// <prefix>-<cluster>-cpu-s (and per component), -requests, -writes. Each
// is also per pod when pods > 0.
func (c Costs) Report(b *testing.B, prefix string, names []string, pods int) {
	for _, n := range names {
		cost := c[n]
		b.ReportMetric(cost.TotalCPU().Seconds(), fmt.Sprintf("%s-%s-cpu-s", prefix, n))
		for _, k := range slices.Sorted(maps.Keys(cost.CPU)) {
			b.ReportMetric(cost.CPU[k].Seconds(), fmt.Sprintf("%s-%s-cpu-s-%s", prefix, n, k))
		}
		if n == SharedEtcd {
			continue
		}
		if pods > 0 {
			b.ReportMetric(cost.TotalCPU().Seconds()*1000/float64(pods), fmt.Sprintf("%s-%s-cpu-ms-per-pod", prefix, n))
		}
		if cost.RequestsUnread {
			continue // rows left out rather than reported as 0
		}
		b.ReportMetric(cost.Requests, fmt.Sprintf("%s-%s-requests", prefix, n))
		b.ReportMetric(cost.Writes, fmt.Sprintf("%s-%s-writes", prefix, n))
		if pods > 0 {
			b.ReportMetric(cost.Requests/float64(pods), fmt.Sprintf("%s-%s-requests-per-pod", prefix, n))
		}
	}
}

// IdleCores returns the CPU each cluster of e (and the shared etcd) uses
// with nothing to do, in cores, measured over window. Work left over from
// whatever ran before (namespaces still being emptied, controllers
// catching up with nodes just added) would count as idle, so it measures
// windows one after another until one's total is no longer falling (not
// a tenth below the window before it), for at most settle, and returns
// the last window's figures and every window's total, in cores, in order.
func IdleCores(ctx context.Context, e *launcher.Environment, window, settle time.Duration) (map[string]float64, []float64, error) {
	var totals []float64
	deadline := time.Now().Add(settle)
	for {
		before, start := measureCPU(e), time.Now()
		select {
		case <-ctx.Done():
			return nil, totals, ctx.Err()
		case <-time.After(window):
		}
		used, took := measureCPU(e).Sub(before), time.Since(start).Seconds()
		cores, total := map[string]float64{}, 0.0
		for name, c := range used {
			cores[name] = c.TotalCPU().Seconds() / took
			total += cores[name]
		}
		totals = append(totals, total)
		if settled(totals) || time.Now().After(deadline) {
			return cores, totals, nil
		}
	}
}

// settled tells whether the last of the windows' totals is no longer
// falling: not a tenth below the one before it.
func settled(totals []float64) bool {
	n := len(totals)
	return n >= 2 && totals[n-1] >= 0.9*totals[n-2]
}
