package forward

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkEndpointPropagation: a Service at the root of the 3-level tree
// and 60 pods created there one every 200 ms, pinned to region east. For
// each pod, from the moment it is seen Ready in its leaf: its endpoint
// ready in the leaf's EndpointSlice (the leaf's own endpointslice
// controller, the baseline), in east's (1 hop up) and in the root's (2
// hops up), all in the same run.
//
//	go test ./test/e2e/forward -run '^$' -bench EndpointPropagation -benchtime 1x
func BenchmarkEndpointPropagation(b *testing.B) {
	const n = 60
	ctx := b.Context()
	labels := map[string]string{"app": "ep"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"topology.kubernetes.io/region": "east"},
		Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
	}}
	for b.Loop() {
		ns := fmt.Sprintf("bench-ep-%d", time.Now().UnixNano()%1_000_000)
		if err := env.Cluster("root").EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		ready, leafEP, midEP, rootEP := newStamps(), newStamps(), newStamps(), newStamps()
		wctx, stop := context.WithCancel(ctx)
		for _, c := range []string{"east-1", "east-2"} {
			ready.followReadyPods(wctx, b, env.Cluster(c).Client, ns)
			leafEP.followEndpoints(wctx, b, env.Cluster(c).Client, ns)
		}
		midEP.followEndpoints(wctx, b, env.Cluster("east").Client, ns)
		rootEP.followEndpoints(wctx, b, env.Cluster("root").Client, ns)

		if _, err := env.Cluster("root").Client.CoreV1().Services(ns).Create(ctx, service(ns, "ep", false), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		framework.CreatePodsFrom(ctx, b, env.Cluster("root").Client, ns, "p", n, tmpl, 200*time.Millisecond)
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
			return rootEP.len() == n && leafEP.len() == n && midEP.len() == n, nil
		})
		stop()
		if err != nil {
			b.Fatalf("endpoints ready: root %d, east %d, leaves %d of %d", rootEP.len(), midEP.len(), leafEP.len(), n)
		}

		b.StopTimer()
		r := ready.snapshot()
		leafP50, leafP99 := framework.Percentiles(framework.Diffs(r, leafEP.snapshot()))
		oneP50, oneP99 := framework.Percentiles(framework.Diffs(r, midEP.snapshot()))
		twoP50, twoP99 := framework.Percentiles(framework.Diffs(r, rootEP.snapshot()))
		b.ReportMetric(leafP50, "ep-leaf-p50-ms")
		b.ReportMetric(leafP99, "ep-leaf-p99-ms")
		b.ReportMetric(oneP50, "ep-1hop-p50-ms")
		b.ReportMetric(oneP99, "ep-1hop-p99-ms")
		b.ReportMetric(twoP50, "ep-2hop-p50-ms")
		b.ReportMetric(twoP99, "ep-2hop-p99-ms")
		b.ReportMetric((twoP50-leafP50)/2, "ep-added-per-hop-p50-ms")
		b.ReportMetric(0, "ns/op")
		_ = env.Cluster("root").Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		waitNoPods(ctx, b, ns)
		b.StartTimer()
	}
}

// stamps holds, by pod IP, when something was first seen for it.
type stamps struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newStamps() *stamps { return &stamps{at: map[string]time.Time{}} }

func (s *stamps) mark(ip string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[ip]; !ok {
		s.at[ip] = t
	}
}

func (s *stamps) snapshot() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.at)
}

func (s *stamps) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

// followReadyPods stamps each pod of ns in the cluster when it is first
// seen Ready with an IP.
func (s *stamps) followReadyPods(ctx context.Context, tb testing.TB, client kubernetes.Interface, ns string) {
	inf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns)).Core().V1().Pods().Informer()
	seen := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Status.PodIP != "" && podutil.IsPodReady(p) {
			s.mark(p.Status.PodIP, time.Now())
		}
	}
	run(ctx, tb, inf, seen)
}

// followEndpoints stamps each address of ns's EndpointSlices in the
// cluster when it is first seen ready.
func (s *stamps) followEndpoints(ctx context.Context, tb testing.TB, client kubernetes.Interface, ns string) {
	inf := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns)).Discovery().V1().EndpointSlices().Informer()
	seen := func(obj any) {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		now := time.Now()
		for _, e := range es.Endpoints {
			if ptr.Deref(e.Conditions.Ready, false) {
				for _, a := range e.Addresses {
					s.mark(a, now)
				}
			}
		}
	}
	run(ctx, tb, inf, seen)
}

func run(ctx context.Context, tb testing.TB, inf cache.SharedIndexInformer, seen func(any)) {
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}); err != nil {
		tb.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		tb.Fatal("informer did not sync")
	}
}
