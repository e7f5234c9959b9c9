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
// watch on the parent), p50 and p99 over 20 joins of west to root.
//
//	go test ./test/e2e/join -run '^$' -bench Join -benchtime 1x
func BenchmarkJoin(b *testing.B) {
	const joins = 20
	ctx := b.Context()
	westTargets, good := westTarget(b)
	rootNodes := env.Cluster("root").Client.CoreV1().Nodes()
	var latencies []time.Duration
	for b.Loop() {
		latencies = latencies[:0]
		for i := range joins {
			name := fmt.Sprintf("bench-join-%d", i)
			w, err := rootNodes.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
			if err != nil {
				b.Fatal(err)
			}
			tg := benchTarget(good, name)
			start := time.Now()
			if _, err := westTargets.Create(ctx, tg, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			if err := waitReady(ctx, w); err != nil {
				b.Fatalf("join %d: %v", i, err)
			}
			latencies = append(latencies, time.Since(start))
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
	}
	p50, p99 := framework.Percentiles(latencies)
	b.ReportMetric(p50, "join-p50-ms")
	b.ReportMetric(p99, "join-p99-ms")
	b.ReportMetric(0, "ns/op")
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
