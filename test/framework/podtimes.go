package framework

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nestlet/nestlet/api"
)

// PodTimes records, per pod, when an informer first saw it added, bound,
// Running and gone (deleted from the API): the stamps latency benchmarks
// subtract. A delegate is recorded under its parent pod's name, so the same
// key follows one pod down a tree.
type PodTimes struct {
	mu                                 sync.Mutex
	Added, Bound, Running, Ready, Gone map[string]time.Time
	// Failed holds the pods seen Failed, and the first reason seen.
	Failed map[string]string
	// Late holds the pods first seen already bound: their creation was
	// missed (the server dropped a slow watch and the informer listed
	// again), so their Added stamp is when they were seen, not created.
	// OnTime leaves them out of what is subtracted from Added.
	Late map[string]bool
	// LateBound holds, for each Late pod, its time from created to bound
	// as the API server stamped them (creationTimestamp, the PodScheduled
	// condition's lastTransitionTime: whole seconds).
	LateBound map[string]time.Duration
}

// NewPodTimes returns empty PodTimes.
func NewPodTimes() *PodTimes {
	return &PodTimes{Added: map[string]time.Time{}, Bound: map[string]time.Time{}, Running: map[string]time.Time{}, Ready: map[string]time.Time{}, Gone: map[string]time.Time{},
		Failed: map[string]string{}, Late: map[string]bool{}, LateBound: map[string]time.Duration{}}
}

// BoundAfterCreated returns every pod's time from created to bound: the
// watch's stamps for the pods seen created, the API server's (whole
// seconds) for the Late ones, so that a pod the watch missed still
// counts. The caller holds the lock.
func (s *PodTimes) BoundAfterCreated() []time.Duration {
	out := Diffs(s.OnTime(s.Added), s.Bound)
	for _, d := range s.LateBound {
		out = append(out, d)
	}
	return out
}

// OnTime returns the stamps of m of the pods seen when they were created
// (not Late): Diffs(s.OnTime(s.Added), s.Bound) is each such pod's time
// from created to bound, where Diffs(s.Added, s.Bound) would count a pod
// first seen bound as bound at once. The caller holds the lock.
func (s *PodTimes) OnTime(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, t := range m {
		if !s.Late[k] {
			out[k] = t
		}
	}
	return out
}

// Follow records the pods of namespace ns through an informer (which lists
// and watches again if the server drops a slow watch during a burst) until
// ctx ends. It returns once the informer has synced.
func (s *PodTimes) Follow(ctx context.Context, tb testing.TB, client kubernetes.Interface, ns string) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	keyOf := func(pod *corev1.Pod) string {
		if parent := pod.Annotations[api.AnnotationParentPod]; parent != "" {
			return strings.TrimPrefix(parent, ns+"/")
		}
		return pod.Name
	}
	gone := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			now := time.Now()
			s.mu.Lock()
			defer s.mu.Unlock()
			setOnce(s.Gone, keyOf(pod), now)
		}
	}
	record := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		s.see(keyOf(pod), pod, time.Now())
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }, DeleteFunc: gone}); err != nil {
		tb.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		tb.Fatal("pod informer did not sync")
	}
}

// see records what pod, under key, was when seen at now.
func (s *PodTimes) see(key string, pod *corev1.Pod, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.Added[key]; !seen && pod.Spec.NodeName != "" {
		s.Late[key] = true
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !pod.CreationTimestamp.IsZero() {
				s.LateBound[key] = max(c.LastTransitionTime.Sub(pod.CreationTimestamp.Time), 0)
			}
		}
	}
	setOnce(s.Added, key, now)
	if pod.Spec.NodeName != "" {
		setOnce(s.Bound, key, now)
	}
	if pod.Status.Phase == corev1.PodRunning {
		setOnce(s.Running, key, now)
	}
	if podutil.IsPodReady(pod) {
		setOnce(s.Ready, key, now)
	}
	if _, failed := s.Failed[key]; !failed && pod.Status.Phase == corev1.PodFailed {
		s.Failed[key] = pod.Status.Reason + ": " + pod.Status.Message
	}
}

// CountFailed returns how many pods have been seen Failed, and the reason
// of one of them.
func (s *PodTimes) CountFailed() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, why := range s.Failed {
		return len(s.Failed), why
	}
	return 0, ""
}

func setOnce(m map[string]time.Time, k string, t time.Time) {
	if _, ok := m[k]; !ok {
		m[k] = t
	}
}

// Lock and Unlock guard the maps while a benchmark reads them.
func (s *PodTimes) Lock()   { s.mu.Lock() }
func (s *PodTimes) Unlock() { s.mu.Unlock() }

// CountRunning returns how many pods have been seen Running.
func (s *PodTimes) CountRunning() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.Running)
}

// CountReady returns how many pods have been seen Ready.
func (s *PodTimes) CountReady() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.Ready)
}

// WaitReady waits (up to 5 minutes) until n pods have been seen Ready.
func (s *PodTimes) WaitReady(ctx context.Context, tb testing.TB, n int) {
	s.waitCount(ctx, tb, n, "Ready", s.CountReady)
}

// WaitRunning waits (up to 5 minutes) until n pods have been seen Running.
func (s *PodTimes) WaitRunning(ctx context.Context, tb testing.TB, n int) {
	s.waitCount(ctx, tb, n, "Running", s.CountRunning)
}

// WaitGone waits (up to 5 minutes) until n pods have been seen deleted.
func (s *PodTimes) WaitGone(ctx context.Context, tb testing.TB, n int) {
	s.waitCount(ctx, tb, n, "gone", s.CountGone)
}

func (s *PodTimes) waitCount(ctx context.Context, tb testing.TB, n int, what string, count func() int) {
	deadline := time.Now().Add(5 * time.Minute)
	for count() < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			tb.Fatalf("only %d of %d pods %s", count(), n, what)
		}
		time.Sleep(50 * time.Millisecond) // polling a local map, not the API
	}
}

// CountGone returns how many pods have been seen deleted.
func (s *PodTimes) CountGone() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.Gone)
}

// DeletePods deletes the pods prefix-0 .. prefix-<n-1> of ns, one every
// `every`, each with its own grace period, and returns when each delete
// was sent.
func DeletePods(ctx context.Context, tb testing.TB, client kubernetes.Interface, ns, prefix string, n int, every time.Duration) map[string]time.Time {
	sent := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	t := time.NewTicker(every)
	defer t.Stop()
	for i := range n {
		if i > 0 {
			<-t.C
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		wg.Go(func() {
			start := time.Now()
			if err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				tb.Error(err)
				return
			}
			mu.Lock()
			sent[name] = start
			mu.Unlock()
		})
	}
	wg.Wait()
	return sent
}

// CreatePods creates n pods named prefix-<i> in ns from template and
// returns when each create was sent. With every = 0 they go as a burst, 10
// creates in flight; otherwise one create starts every `every` (paced, so
// that latency is measured without a queue).
func CreatePods(ctx context.Context, tb testing.TB, client kubernetes.Interface, ns, prefix string, n int, template corev1.PodSpec, every time.Duration) map[string]time.Time {
	return CreatePodsFrom(ctx, tb, client, ns, prefix, n, corev1.PodTemplateSpec{Spec: template}, every)
}

// CreatePodsFrom is CreatePods with the pods' labels and annotations from
// template too.
func CreatePodsFrom(ctx context.Context, tb testing.TB, client kubernetes.Interface, ns, prefix string, n int, template corev1.PodTemplateSpec, every time.Duration) map[string]time.Time {
	created := map[string]time.Time{}
	var mu sync.Mutex
	sem := make(chan struct{}, 10)
	if every > 0 {
		sem = make(chan struct{}, n)
	}
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	var wg sync.WaitGroup
	for i := range n {
		if tick != nil && i > 0 {
			<-tick
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			pod := &corev1.Pod{ObjectMeta: *template.ObjectMeta.DeepCopy(), Spec: *template.Spec.DeepCopy()}
			pod.Name, pod.Namespace = name, ns
			start := time.Now()
			if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				tb.Error(err)
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

// Percentiles returns the p50 and p99 of ds in milliseconds.
func Percentiles(ds []time.Duration) (p50, p99 float64) {
	return Quantile(ds, 0.5), Quantile(ds, 0.99)
}

// Median returns the middle figure of xs (the upper middle of an even
// number), NaN when xs is empty (reported, the table says it measured
// nothing; never a 0 that reads as a figure). xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Quantile returns the q-quantile of ds (nearest rank) in milliseconds,
// NaN when ds is empty (as Median). ds is not modified.
func Quantile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1)+0.5)].Microseconds()) / 1000
}

// Diffs returns to[k] - from[k] for every key in both.
func Diffs(from, to map[string]time.Time) []time.Duration {
	var out []time.Duration
	for k, t0 := range from {
		if t1, ok := to[k]; ok {
			out = append(out, t1.Sub(t0))
		}
	}
	return out
}
