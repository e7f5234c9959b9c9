// Package scheduler benchmarks nestlet-scheduler against the stock
// kube-scheduler on real control planes.
package scheduler

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

const (
	realNodes    = 500
	virtualNodes = 20
	pods         = 2000
)

// nodesOf returns the 500 real and 20 virtual node options of one cluster:
// virtual nodes carry a summary (two regions, largest free shapes), the
// virtual-node taint, and are kept Ready by kwok.
func nodesOf() []launcher.NodeOptions {
	var out []launcher.NodeOptions
	capacity := func(cpu string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110")}
	}
	for i := range realNodes {
		region := []string{"east", "west"}[i%2]
		out = append(out, launcher.NodeOptions{Name: fmt.Sprintf("n-%03d", i), Capacity: capacity("16"),
			Labels: map[string]string{"topology.kubernetes.io/region": region}})
	}
	for i := range virtualNodes {
		name := fmt.Sprintf("child-%02d", i)
		// Each region of a child: 50 nodes of 16 CPU.
		groupTotal := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("800"), corev1.ResourceMemory: resource.MustParse("3200Gi"), corev1.ResourcePods: resource.MustParse("5500")}
		group := func(region string) api.Group {
			return api.Group{Labels: map[string]string{"topology.kubernetes.io/region": region}, Nodes: 50,
				Allocatable: groupTotal, Free: groupTotal,
				Shapes: []corev1.ResourceList{capacity("16"), capacity("16"), capacity("16"), capacity("16")}}
		}
		s := api.Summary{Cluster: name, Covered: []string{name}, GroupKeys: api.DefaultGroupKeys,
			Groups: []api.Group{group("east"), group("west")}, Time: time.Now().UTC().Format(time.RFC3339)}
		raw, _ := json.Marshal(s)
		capTotal := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1600"), corev1.ResourceMemory: resource.MustParse("6400Gi"), corev1.ResourcePods: resource.MustParse("11000")}
		out = append(out, launcher.NodeOptions{Name: name, Capacity: capTotal,
			Labels:      map[string]string{api.LabelCluster: name, api.LabelNodeType: api.NodeTypeVirtualKubelet},
			Annotations: map[string]string{api.AnnotationSummary: string(raw)},
			Taints:      []corev1.Taint{{Key: api.TaintKeyProvider, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}}})
	}
	return out
}

// addNodes creates the nodes of c, 20 at a time.
func addNodes(ctx context.Context, b *testing.B, c *launcher.Cluster, nodes []launcher.NodeOptions) {
	sem := make(chan struct{}, 20)
	var wg sync.WaitGroup
	for _, n := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := c.AddNode(ctx, n); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}

type result struct {
	throughput  float64 // pods bound per second
	p50, p99    float64 // ms from create to bound
	decisionP99 float64 // ms, the scheduler's own algorithm latency
}

// run creates the pods in c (20 creates in flight) and waits until all are
// bound, timing each from its create to the informer seeing it bound.
func run(ctx context.Context, b *testing.B, c *launcher.Cluster) result {
	ns := "bench"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	created, bound := map[string]time.Time{}, map[string]time.Time{}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	done := make(chan struct{})
	record := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := bound[p.Name]; !seen {
			bound[p.Name] = time.Now()
			if len(bound) == pods {
				close(done)
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	start := time.Now()
	sem := make(chan struct{}, 20)
	var wg sync.WaitGroup
	for i := range pods {
		name := fmt.Sprintf("p-%04d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"topology.kubernetes.io/region": []string{"east", "west"}[i%2]},
			Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}},
		}}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t := time.Now()
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			created[name] = t
			mu.Unlock()
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%s: only %d of %d pods bound", c.Name, len(bound), pods)
	}
	mu.Lock()
	defer mu.Unlock()
	var last time.Time
	var lat []time.Duration
	for name, t0 := range created {
		t1 := bound[name]
		lat = append(lat, t1.Sub(t0))
		if t1.After(last) {
			last = t1
		}
	}
	p50, p99 := framework.Percentiles(lat)
	return result{throughput: float64(pods) / last.Sub(start).Seconds(), p50: p50, p99: p99,
		decisionP99: decisionP99(ctx, b, c)}
}

// decisionP99 reads the scheduler's scheduling_algorithm_duration_seconds
// histogram and returns its 99th percentile in ms (the upper bound of the
// bucket holding it).
func decisionP99(ctx context.Context, b *testing.B, c *launcher.Cluster) float64 {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test scheduler's self-signed certificate
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.SchedulerMetricsURL, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatalf("reading %s: %v", c.SchedulerMetricsURL, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	fam, ok := families["scheduler_scheduling_algorithm_duration_seconds"]
	if !ok || len(fam.GetMetric()) == 0 {
		b.Fatalf("%s: no scheduling_algorithm_duration_seconds", c.Name)
	}
	h := fam.GetMetric()[0].GetHistogram()
	target := 0.99 * float64(h.GetSampleCount())
	for _, bk := range h.GetBucket() {
		if float64(bk.GetCumulativeCount()) >= target {
			return bk.GetUpperBound() * 1000
		}
	}
	return math.Inf(1)
}

// BenchmarkSchedulerVsStock schedules the same 2,000 pods (half pinned to
// each region) over the same 500 kwok nodes plus 20 virtual nodes with
// nestlet-scheduler and with the stock kube-scheduler, one cluster each, in
// one run, and reports throughput, create-to-bound latency and their ratios.
// The stock scheduler cannot use the virtual nodes (it does not tolerate
// their taint); nestlet-scheduler weighs them with the rest.
//
//	go test ./test/e2e/scheduler -run '^$' -bench SchedulerVsStock -benchtime 1x
func BenchmarkSchedulerVsStock(b *testing.B) {
	ctx := b.Context()
	env := framework.StartForTest(b, launcher.Spec{Clusters: []launcher.ClusterOptions{
		{Name: "nestlet", SchedulerMetrics: true}, {Name: "stock", StockScheduler: true, SchedulerMetrics: true},
	}})
	for b.Loop() {
		b.StopTimer()
		for _, c := range env.Clusters() {
			addNodes(ctx, b, c, nodesOf())
		}
		b.StartTimer()
		stock := run(ctx, b, env.Cluster("stock"))
		// Its kwok would go on making 2,000 pods Running during the next
		// run: stop that cluster so that each scheduler has the machine.
		env.Cluster("stock").Stop()
		ours := run(ctx, b, env.Cluster("nestlet"))
		b.ReportMetric(ours.throughput, "nestlet-pods/s")
		b.ReportMetric(stock.throughput, "stock-pods/s")
		b.ReportMetric(ours.throughput/stock.throughput, "throughput-ratio")
		b.ReportMetric(ours.p50, "nestlet-p50-ms")
		b.ReportMetric(ours.p99, "nestlet-p99-ms")
		b.ReportMetric(stock.p50, "stock-p50-ms")
		b.ReportMetric(stock.p99, "stock-p99-ms")
		b.ReportMetric(ours.decisionP99, "nestlet-decision-p99-ms")
		b.ReportMetric(stock.decisionP99, "stock-decision-p99-ms")
		b.ReportMetric(0, "ns/op")
	}
}
