package depth

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

const (
	latencyPods = 200
	// latencyGap separates a pod Running from the next one's creation:
	// one pod on its way at a time, so that the figures are latency, not
	// time spent in a queue (the burst case is BenchmarkForwardingLatency
	// in test/e2e/forward). A fixed rate (10/s) saturated this 2-core
	// machine at three hops once every level wrote a reservation too
	// (cpu-ms-per-pod-3hop says what a pod costs the tree).
	latencyGap = 20 * time.Millisecond
)

// BenchmarkHopLatency creates 200 pods, one at a time (each once the one
// before is Running), in each level of the chain in turn: in the leaf l3
// (0 hops: the baseline), in l2 (1 hop), l1 (2 hops) and the root (3
// hops). Every other pod asks to be bound first (api.AnnotationBindFirst:
// no reservation on its way, as before placement by reservation), so that
// what the reservation costs is measured in the same run, pods
// interleaved. For each level it reports end-to-end latency, created ->
// Running where created (seen by an informer there), p50 and p99, of the
// default pods (paced-*) and of the bind-first ones (bindfirst-*); what
// each added hop costs: hop<k> is e2e(k hops) - e2e(k-1), per-hop the mean
// over the three, both at p50; reservation-added-per-hop the default's
// per-hop minus the bind-first's; the CPU every process of the tree used
// per pod (cpu-ms-per-pod-<k>hop); and, for the default pods, the
// segments on the way (see segments).
//
//	go test ./test/e2e/depth -run '^$' -bench HopLatency -benchtime 1x
func BenchmarkHopLatency(b *testing.B) {
	ctx := b.Context()
	reserved := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	bindFirst := *reserved.DeepCopy()
	bindFirst.Annotations = map[string]string{api.AnnotationBindFirst: "true"}
	for b.Loop() {
		suffix := time.Now().UnixNano() % 1_000_000
		var e2e, first [4][2]float64 // by hops: p50, p99
		var namespaces []string
		var times []*framework.PodTimes
		// From the leaf up: created in chain[3-hops].
		for hops := 0; hops <= 3; hops++ {
			ns := fmt.Sprintf("bench-%dhop-%d", hops, suffix)
			namespaces = append(namespaces, ns)
			times = times[:0]
			for _, c := range chain[3-hops:] {
				if err := env.Cluster(c).EnsureNamespace(ctx, ns); err != nil {
					b.Fatal(err)
				}
				pt := framework.NewPodTimes()
				pt.Follow(ctx, b, env.Cluster(c).Client, ns)
				times = append(times, pt)
			}
			top := times[0]
			// Interleaved: a default pod, then a bind-first one, each
			// created once the one before is Running.
			client := env.Cluster(chain[3-hops]).Client
			created, createdFirst := map[string]time.Time{}, map[string]time.Time{}
			costs0, err := framework.MeasureCosts(ctx, env)
			if err != nil {
				b.Fatal(err)
			}
			for i := range latencyPods {
				template, prefix, into := reserved, "p", created
				if i%2 == 1 {
					template, prefix, into = bindFirst, "f", createdFirst
				}
				name := fmt.Sprintf("%s-%d", prefix, i/2)
				pod := &corev1.Pod{ObjectMeta: *template.ObjectMeta.DeepCopy(), Spec: *template.Spec.DeepCopy()}
				pod.Name = name
				into[name] = time.Now()
				if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				top.WaitRunning(ctx, b, i+1)
				time.Sleep(latencyGap)
			}
			costs1, err := framework.MeasureCosts(ctx, env)
			if err != nil {
				b.Fatal(err)
			}
			var cpu time.Duration
			for _, c := range costs1.Sub(costs0) {
				cpu += c.TotalCPU()
			}
			b.ReportMetric(float64(cpu.Milliseconds())/latencyPods, fmt.Sprintf("cpu-ms-per-pod-%dhop", hops))
			top.Lock()
			e2e[hops][0], e2e[hops][1] = framework.Percentiles(framework.Diffs(created, top.Running))
			first[hops][0], first[hops][1] = framework.Percentiles(framework.Diffs(createdFirst, top.Running))
			top.Unlock()
			b.ReportMetric(e2e[hops][0], fmt.Sprintf("paced-%dhop-p50-ms", hops))
			b.ReportMetric(e2e[hops][1], fmt.Sprintf("paced-%dhop-p99-ms", hops))
			b.ReportMetric(first[hops][0], fmt.Sprintf("bindfirst-%dhop-p50-ms", hops))
			b.ReportMetric(first[hops][1], fmt.Sprintf("bindfirst-%dhop-p99-ms", hops))
			if hops > 0 {
				b.ReportMetric(e2e[hops][0]-e2e[hops-1][0], fmt.Sprintf("paced-hop%d-p50-ms", hops))
			}
			segments(b, fmt.Sprintf("paced-%dhop-", hops), chain[3-hops:], times, created)
		}
		perHop, perHopFirst := (e2e[3][0]-e2e[0][0])/3, (first[3][0]-first[0][0])/3
		b.ReportMetric(perHop, "paced-per-hop-p50-ms")
		b.ReportMetric(perHopFirst, "bindfirst-per-hop-p50-ms")
		b.ReportMetric(perHop-perHopFirst, "reservation-added-per-hop-p50-ms")
		b.StopTimer()
		for _, ns := range namespaces {
			for _, c := range chain {
				_ = env.Cluster(c).Client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(0, "ns/op")
}

// segments reports, for one run, the p50 of each segment on the way of
// the pods named in of, seen by the informers of clusters (from where the
// pods were created down):
// sched-<cluster> (added -> bound there: below the first level, a held
// delegate waits there for the levels above to bind), release-<cluster>
// (bound in the level above -> bound there) and up-<cluster> (Running
// there -> Running in the level above).
func segments(b *testing.B, prefix string, clusters []string, times []*framework.PodTimes, of map[string]time.Time) {
	for _, pt := range times {
		pt.Lock()
		defer pt.Unlock()
	}
	for i, c := range clusters {
		p50, _ := framework.Percentiles(framework.Diffs(only(times[i].OnTime(times[i].Added), of), times[i].Bound))
		b.ReportMetric(p50, prefix+"sched-"+c+"-p50-ms")
		if i > 0 {
			// Placed by reservation, the delegate exists (held) before the
			// level above binds: the way down is the release, from the
			// bind above to the bind here.
			down, _ := framework.Percentiles(framework.Diffs(only(times[i-1].Bound, of), times[i].Bound))
			up, _ := framework.Percentiles(framework.Diffs(only(times[i].Running, of), times[i-1].Running))
			b.ReportMetric(down, prefix+"release-"+c+"-p50-ms")
			b.ReportMetric(up, prefix+"up-"+c+"-p50-ms")
		}
	}
}

// only returns the stamps of m of the pods named in of.
func only(m, of map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(of))
	for k, t := range m {
		if _, ok := of[k]; ok {
			out[k] = t
		}
	}
	return out
}
