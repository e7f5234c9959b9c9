package join

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkJoin measures join latency end to end, as LESSONS.md asks: from
// the Target applied in the child to its node Ready in the parent (seen by a
// watch on the parent), p50 and p99 over 20 joins of west to root, first
// straight across the WAN between their hosts, then through a link that adds
// 25 ms each way (a 50 ms round trip, toxiproxy on every byte west's host
// sends to the root's API server and back). The extra time divided by 50 ms
// is how many round trips a join waits for.
//
//	go test ./test/e2e/join -run '^$' -bench Join -benchtime 1x
func BenchmarkJoin(b *testing.B) {
	const joins = 20
	const rtt = 50 * time.Millisecond
	var direct, wan []time.Duration
	for b.Loop() {
		direct = joinTimes(b, "bench-join", joins, "")
		// On hosts the link carries all of west's traffic to the root
		// from now on, until closed.
		link, err := framework.NewLink(b.Context(), env.Cluster("west"), env.Cluster("root"))
		if err != nil {
			b.Fatal(err)
		}
		if err := link.Latency(rtt/2, 0); err != nil {
			link.Close()
			b.Fatal(err)
		}
		wan = joinTimes(b, "bench-join-wan", joins, link.URL)
		link.Close()
	}
	p50, p99 := framework.Percentiles(direct)
	b.ReportMetric(p50, "join-p50-ms")
	b.ReportMetric(p99, "join-p99-ms")
	wan50, wan99 := framework.Percentiles(wan)
	b.ReportMetric(wan50, "join-wan50ms-p50-ms")
	b.ReportMetric(wan99, "join-wan50ms-p99-ms")
	b.ReportMetric(wan50-p50, "join-wan50ms-extra-p50-ms")
	b.ReportMetric((wan50-p50)/float64(rtt.Milliseconds()), "join-round-trips-p50")
	b.ReportMetric(0, "ns/op")
}

// joinTimes joins west to the root n times, one after the other, each under
// a name of its own and removed again before the next, through parentURL
// when set; it returns each join's latency, and reports its phases
// (csrPhases.report: <prefix>-discovery, -approval and -register).
func joinTimes(b *testing.B, prefix string, n int, parentURL string) []time.Duration {
	ctx := b.Context()
	westTargets, good := westTarget(b)
	rootNodes := env.Cluster("root").Client.CoreV1().Nodes()
	phases := followCSRs(b, prefix)
	created, ready := map[string]time.Time{}, map[string]time.Duration{}
	defer func() { phases.report(b, prefix, created, ready) }()
	var latencies []time.Duration
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		w, err := rootNodes.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			b.Fatal(err)
		}
		tg := benchTarget(good, name)
		if parentURL != "" {
			tg.Spec.ParentURL = parentURL
		}
		start := time.Now()
		if _, err := westTargets.Create(ctx, tg, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := waitReady(ctx, w); err != nil {
			b.Fatalf("join %s: %v", name, err)
		}
		latencies = append(latencies, time.Since(start))
		created[name], ready[name] = start, time.Since(start)
		w.Stop()

		b.StopTimer()
		if err := westTargets.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := rootNodes.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			b.Fatalf("node %s not removed after its Target was deleted", name)
		}
		b.StartTimer()
	}
	return latencies
}

func waitReady(ctx context.Context, w watch.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("node not Ready: %w", ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch closed")
			}
			if n, isNode := ev.Object.(*corev1.Node); isNode && launcher.NodeReady(n) {
				return nil
			}
		}
	}
}
