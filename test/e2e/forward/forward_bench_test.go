package forward

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/provider/forward"
)

// stamps records, per pod name, when a watch first saw it added, bound and
// Running.
type stamps struct {
	mu                    sync.Mutex
	added, bound, running map[string]time.Time
}

func newStamps() *stamps {
	return &stamps{added: map[string]time.Time{}, bound: map[string]time.Time{}, running: map[string]time.Time{}}
}

// follow records the pods of ns through an informer (which lists and
// watches again if the server drops a slow watch during a burst).
func (s *stamps) follow(ctx context.Context, b *testing.B, client kubernetes.Interface, ns string) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	record := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		key := pod.Name
		if parent := pod.Annotations[forward.AnnotationParentPod]; parent != "" {
			key = parent[len(ns)+1:] // delegates are keyed by their parent's name
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		setOnce(s.added, key, now)
		if pod.Spec.NodeName != "" {
			setOnce(s.bound, key, now)
		}
		if pod.Status.Phase == corev1.PodRunning {
			setOnce(s.running, key, now)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
}

func setOnce(m map[string]time.Time, k string, t time.Time) {
	if _, ok := m[k]; !ok {
		m[k] = t
	}
}

func (s *stamps) countRunning() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

// createPods creates n pods named prefix-i in ns, 10 at a time, and returns
// when each create was sent.
func createPods(ctx context.Context, b *testing.B, client kubernetes.Interface, ns, prefix string, n int, template corev1.PodSpec) map[string]time.Time {
	created := map[string]time.Time{}
	var mu sync.Mutex
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: *template.DeepCopy()}
			start := time.Now()
			if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			created[name] = start
			mu.Unlock()
		})
	}
	wg.Wait()
	return created
}

func waitAll(ctx context.Context, b *testing.B, s *stamps, n int) {
	deadline := time.Now().Add(5 * time.Minute)
	for s.countRunning() < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Fatalf("only %d of %d pods Running", s.countRunning(), n)
		}
		time.Sleep(50 * time.Millisecond) // polling a local map, not the API
	}
}

func percentiles(ds []time.Duration) (p50, p99 float64) {
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1)+0.5)].Microseconds()) / 1000 }
	return at(0.5), at(0.99)
}

func diffs(from, to map[string]time.Time) []time.Duration {
	var out []time.Duration
	for k, t0 := range from {
		if t1, ok := to[k]; ok {
			out = append(out, t1.Sub(t0))
		}
	}
	return out
}

// BenchmarkForwardingLatency measures, over 200 pods created at the root of
// the 3-level tree (10 creates in flight): per-hop latency (pod bound at one
// level -> its delegate seen at the next), status latency on the way back up
// (Running at one level -> Running at the level above), and end-to-end
// latency (created at the root -> Running at the root, 2 hops), against the
// same 200 pods created directly in a leaf, and created one level up (in
// west: 1 hop), in the same run.
//
//	go test ./test/e2e/forward -run '^$' -bench ForwardingLatency -benchtime 1x
func BenchmarkForwardingLatency(b *testing.B) {
	const n = 200
	ctx := b.Context()
	spec := corev1.PodSpec{
		NodeSelector: map[string]string{"topology.kubernetes.io/region": "east"},
		Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
	}
	for b.Loop() {
		suffix := time.Now().UnixNano() % 1_000_000
		nested, direct := fmt.Sprintf("bench-nested-%d", suffix), fmt.Sprintf("bench-direct-%d", suffix)
		oneHop := fmt.Sprintf("bench-onehop-%d", suffix)
		for _, c := range []string{"west", "west-1", "west-2"} {
			if err := env.Cluster(c).EnsureNamespace(ctx, oneHop); err != nil {
				b.Fatal(err)
			}
		}
		for _, c := range []string{"root", "east", "east-1", "east-2"} {
			if err := env.Cluster(c).EnsureNamespace(ctx, nested); err != nil {
				b.Fatal(err)
			}
		}
		if err := env.Cluster("east-1").EnsureNamespace(ctx, direct); err != nil {
			b.Fatal(err)
		}

		// Baseline: the same pods directly in a leaf.
		leaf := newStamps()
		leaf.follow(ctx, b, env.Cluster("east-1").Client, direct)
		leafCreated := createPods(ctx, b, env.Cluster("east-1").Client, direct, "p", n, spec)
		waitAll(ctx, b, leaf, n)

		// One level: the same pods created in west (the other region, so
		// that the east leaves keep room for the 2-hop run), forwarded once.
		westSpec := *spec.DeepCopy()
		westSpec.NodeSelector = map[string]string{"topology.kubernetes.io/region": "west"}
		one := newStamps()
		one.follow(ctx, b, env.Cluster("west").Client, oneHop)
		oneCreated := createPods(ctx, b, env.Cluster("west").Client, oneHop, "p", n, westSpec)
		waitAll(ctx, b, one, n)

		root, mid, leaves := newStamps(), newStamps(), newStamps()
		root.follow(ctx, b, env.Cluster("root").Client, nested)
		mid.follow(ctx, b, env.Cluster("east").Client, nested)
		leaves.follow(ctx, b, env.Cluster("east-1").Client, nested)
		leaves.follow(ctx, b, env.Cluster("east-2").Client, nested)
		rootCreated := createPods(ctx, b, env.Cluster("root").Client, nested, "p", n, spec)
		waitAll(ctx, b, root, n)

		b.StopTimer()
		root.mu.Lock()
		mid.mu.Lock()
		leaves.mu.Lock()
		leaf.mu.Lock()
		hop1p50, hop1p99 := percentiles(diffs(root.bound, mid.added))
		hop2p50, hop2p99 := percentiles(diffs(mid.bound, leaves.added))
		up1p50, up1p99 := percentiles(diffs(leaves.running, mid.running))
		up2p50, up2p99 := percentiles(diffs(mid.running, root.running))
		sched50, sched99 := percentiles(diffs(rootCreated, root.bound))
		e2ep50, e2ep99 := percentiles(diffs(rootCreated, root.running))
		flatp50, flatp99 := percentiles(diffs(leafCreated, leaf.running))
		one.mu.Lock()
		onep50, onep99 := percentiles(diffs(oneCreated, one.running))
		one.mu.Unlock()
		leaf.mu.Unlock()
		leaves.mu.Unlock()
		mid.mu.Unlock()
		root.mu.Unlock()
		b.ReportMetric(hop1p50, "hop1-p50-ms")
		b.ReportMetric(hop1p99, "hop1-p99-ms")
		b.ReportMetric(hop2p50, "hop2-p50-ms")
		b.ReportMetric(hop2p99, "hop2-p99-ms")
		b.ReportMetric(sched50, "root-bind-p50-ms")
		b.ReportMetric(sched99, "root-bind-p99-ms")
		b.ReportMetric(up1p50, "status-up1-p50-ms")
		b.ReportMetric(up1p99, "status-up1-p99-ms")
		b.ReportMetric(up2p50, "status-up2-p50-ms")
		b.ReportMetric(up2p99, "status-up2-p99-ms")
		b.ReportMetric(e2ep50, "e2e-2hop-p50-ms")
		b.ReportMetric(e2ep99, "e2e-2hop-p99-ms")
		b.ReportMetric(onep50, "e2e-1hop-p50-ms")
		b.ReportMetric(onep99, "e2e-1hop-p99-ms")
		b.ReportMetric(flatp50, "direct-leaf-p50-ms")
		b.ReportMetric(flatp99, "direct-leaf-p99-ms")
		b.ReportMetric(e2ep50/flatp50, "e2e/direct-p50")
		b.ReportMetric(e2ep99/flatp99, "e2e/direct-p99")
		b.ReportMetric(0, "ns/op")
		for _, c := range []string{"root", "west", "east-1"} {
			for _, ns := range []string{nested, direct, oneHop} {
				_ = env.Cluster(c).Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			}
		}
		b.StartTimer()
	}
}
