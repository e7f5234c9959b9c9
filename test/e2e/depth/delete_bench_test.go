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

const deletePods = 50

// BenchmarkDeletionLatency creates 50 pods (default grace period, 30 s) in
// each level of the chain in turn, from the leaf l3 (0 hops: the baseline)
// to the root (3 hops), waits until they run, then deletes them where they
// were created, one every 200 ms, and reports delete sent -> pod gone
// there (seen by an informer), p50 and p99. A virtual node removes a
// deleted pod as soon as its delegate below is gone, as a kubelet does once
// the containers have stopped, so no level waits out the grace period.
//
//	go test ./test/e2e/depth -run '^$' -bench DeletionLatency -benchtime 1x
func BenchmarkDeletionLatency(b *testing.B) {
	ctx := b.Context()
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}
	for b.Loop() {
		suffix := time.Now().UnixNano() % 1_000_000
		var p50s [4]float64
		for hops := 0; hops <= 3; hops++ {
			top := chain[3-hops]
			ns := fmt.Sprintf("bench-del-%dhop-%d", hops, suffix)
			if err := env.Cluster(top).EnsureNamespace(ctx, ns); err != nil {
				b.Fatal(err)
			}
			pt := framework.NewPodTimes()
			pt.Follow(ctx, b, env.Cluster(top).Client, ns)
			framework.CreatePods(ctx, b, env.Cluster(top).Client, ns, "p", deletePods, spec, 100*time.Millisecond)
			pt.WaitRunning(ctx, b, deletePods)
			sent := framework.DeletePods(ctx, b, env.Cluster(top).Client, ns, "p", deletePods, 200*time.Millisecond)
			pt.WaitGone(ctx, b, deletePods)
			pt.Lock()
			p50, p99 := framework.Percentiles(framework.Diffs(sent, pt.Gone))
			pt.Unlock()
			p50s[hops] = p50
			b.ReportMetric(p50, fmt.Sprintf("delete-%dhop-p50-ms", hops))
			b.ReportMetric(p99, fmt.Sprintf("delete-%dhop-p99-ms", hops))
			_ = env.Cluster(top).Client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
		}
		b.ReportMetric((p50s[3]-p50s[0])/3, "delete-per-hop-p50-ms")
	}
	b.ReportMetric(0, "ns/op")
}
