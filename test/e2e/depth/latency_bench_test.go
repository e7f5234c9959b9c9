package depth

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/test/framework"
)

const (
	latencyPods = 200
	// One pod every 100 ms (10/s): well under what every level sustains,
	// so the figures are latency, not time spent in a queue (the burst
	// case is BenchmarkForwardingLatency in test/e2e/forward).
	latencyEvery = 100 * time.Millisecond
)

// BenchmarkHopLatency creates 200 pods, paced at 10/s, in each level of the
// chain in turn: in the leaf l3 (0 hops: the baseline), in l2 (1 hop), l1
// (2 hops) and the root (3 hops). For each it reports end-to-end latency,
// created -> Running where created (seen by an informer there), p50 and
// p99, and what each added hop costs: hop<k> is e2e(k hops) - e2e(k-1),
// per-hop the mean over the three, both at p50; and for each run the
// segments on the way (see segments).
//
//	go test ./test/e2e/depth -run '^$' -bench HopLatency -benchtime 1x
func BenchmarkHopLatency(b *testing.B) {
	ctx := b.Context()
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}
	for b.Loop() {
		suffix := time.Now().UnixNano() % 1_000_000
		var e2e [4][2]float64 // by hops: p50, p99
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
			created := framework.CreatePods(ctx, b, env.Cluster(chain[3-hops]).Client, ns, "p", latencyPods, spec, latencyEvery)
			top.WaitRunning(ctx, b, latencyPods)
			top.Lock()
			e2e[hops][0], e2e[hops][1] = framework.Percentiles(framework.Diffs(created, top.Running))
			top.Unlock()
			b.ReportMetric(e2e[hops][0], fmt.Sprintf("paced-%dhop-p50-ms", hops))
			b.ReportMetric(e2e[hops][1], fmt.Sprintf("paced-%dhop-p99-ms", hops))
			if hops > 0 {
				b.ReportMetric(e2e[hops][0]-e2e[hops-1][0], fmt.Sprintf("paced-hop%d-p50-ms", hops))
			}
			segments(b, fmt.Sprintf("paced-%dhop-", hops), chain[3-hops:], times)
		}
		b.ReportMetric((e2e[3][0]-e2e[0][0])/3, "paced-per-hop-p50-ms")
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

// segments reports, for one run, the p50 of each segment on the way, seen
// by the informers of clusters (from where the pods were created down):
// sched-<cluster> (added -> bound there: below the first level, a held
// delegate waits there for the levels above to bind), release-<cluster>
// (bound in the level above -> bound there) and up-<cluster> (Running
// there -> Running in the level above).
func segments(b *testing.B, prefix string, clusters []string, times []*framework.PodTimes) {
	for _, pt := range times {
		pt.Lock()
		defer pt.Unlock()
	}
	for i, c := range clusters {
		p50, _ := framework.Percentiles(framework.Diffs(times[i].OnTime(times[i].Added), times[i].Bound))
		b.ReportMetric(p50, prefix+"sched-"+c+"-p50-ms")
		if i > 0 {
			// Placed by reservation, the delegate exists (held) before the
			// level above binds: the way down is the release, from the
			// bind above to the bind here.
			down, _ := framework.Percentiles(framework.Diffs(times[i-1].Bound, times[i].Bound))
			up, _ := framework.Percentiles(framework.Diffs(times[i].Running, times[i-1].Running))
			b.ReportMetric(down, prefix+"release-"+c+"-p50-ms")
			b.ReportMetric(up, prefix+"up-"+c+"-p50-ms")
		}
	}
}
