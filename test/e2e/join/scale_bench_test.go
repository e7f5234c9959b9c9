package join

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/test/framework"
)

// benchTargets creates n Targets in west at once, each a join of root
// under its own cluster name prefix-<i> (the same token and pin as west's
// own join), and returns, per name, the time from its create to its node
// Ready in root (seen by one watch on root's nodes). whileUp (optional)
// runs once all are Ready. The Targets are deleted, and their nodes gone,
// before it returns.
func benchTargets(b *testing.B, prefix string, n int, whileUp func()) map[string]time.Duration {
	ctx := b.Context()
	westTargets, good := westTarget(b)
	rootNodes := env.Cluster("root").Client.CoreV1().Nodes()
	w, err := rootNodes.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		wg.Go(func() {
			tg := &v1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *good.Spec.DeepCopy()}
			tg.Spec.ClusterName = name
			start := time.Now()
			if _, err := westTargets.Create(ctx, tg, metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			created[name] = start
			mu.Unlock()
		})
	}
	wg.Wait()
	defer func() {
		for i := range n {
			_ = westTargets.Delete(context.WithoutCancel(ctx), fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{})
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := rootNodes.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // retried
			}
			return !slices.ContainsFunc(list.Items, func(n corev1.Node) bool { return strings.HasPrefix(n.Name, prefix+"-") }), nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			b.Errorf("bench nodes %s-* not removed: %v", prefix, err)
		}
	}()
	if b.Failed() {
		b.FailNow()
	}
	ready := map[string]time.Duration{}
	timeout := time.After(3 * time.Minute)
	for len(ready) < n {
		select {
		case <-timeout:
			b.Fatalf("%d of %d nodes Ready after 3m", len(ready), n)
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("watch closed")
			}
			node, isNode := ev.Object.(*corev1.Node)
			if !isNode || ev.Type == watch.Deleted || !strings.HasPrefix(node.Name, prefix+"-") || !framework.NodeReady(node) {
				continue
			}
			if _, done := ready[node.Name]; !done {
				mu.Lock()
				ready[node.Name] = time.Since(created[node.Name])
				mu.Unlock()
			}
		}
	}
	if whileUp != nil {
		whileUp()
	}
	return ready
}

// westTarget returns a Target client of west and west's own (Ready)
// Target, whose spec the benchmarks copy under other cluster names.
func westTarget(b *testing.B) (v1alpha1.TargetInterface, *v1alpha1.Target) {
	westTargets, err := v1alpha1.NewTargetClient(env.Cluster("west").Config)
	if err != nil {
		b.Fatal(err)
	}
	good, err := westTargets.Get(b.Context(), targetOf["west"], metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return westTargets, good
}

func quantileMS(ds map[string]time.Duration, q float64) float64 {
	var s []time.Duration
	for _, d := range ds {
		s = append(s, d)
	}
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1)+0.5)].Microseconds()) / 1000
}

// BenchmarkJoin60AtOnce: 60 joins of one parent at once, from Target
// applied to node Ready in the parent. The 60 Targets are applied in one
// child cluster (west) under 60 cluster names: 60 CSRs, identities, nodes
// and leases against the real parent at once, and one agent running all of
// them (the 60 children's API servers are not simulated here).
func BenchmarkJoin60AtOnce(b *testing.B) {
	for b.Loop() {
		ready := benchTargets(b, "bench-60", 60, nil)
		b.ReportMetric(quantileMS(ready, 0.5), "join60-p50-ms")
		b.ReportMetric(quantileMS(ready, 0.99), "join60-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}
