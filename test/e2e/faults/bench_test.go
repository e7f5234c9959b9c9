package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// census counts, for the pods of ns: the root's live pods, and the leaves'
// delegates that are orphans (no live root pod) or duplicates (a second
// live delegate of one root pod).
func census(ctx context.Context, ns string) (live, orphans, duplicates int, err error) {
	rootPods, _, err := podsOf(ctx, "root", ns)
	if err != nil {
		return 0, 0, 0, err
	}
	seen := map[string]int{}
	for _, leaf := range []string{"east", "west"} {
		list, err := env.Cluster(leaf).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, 0, err
		}
		for _, d := range list.Items {
			if d.DeletionTimestamp != nil || d.Status.Phase == corev1.PodSucceeded || d.Status.Phase == corev1.PodFailed {
				continue
			}
			parent := strings.TrimPrefix(d.Annotations[api.AnnotationParentPod], ns+"/")
			if _, ok := rootPods[parent]; !ok {
				orphans++
				continue
			}
			if seen[parent]++; seen[parent] > 1 {
				duplicates++
			}
		}
	}
	return len(rootPods), orphans, duplicates, nil
}

// BenchmarkPartitions cuts east off the root three times for half the
// root's grace period (short) and three times until the root has replaced
// east's pods in west (long), with a 6-replica Deployment over both
// regions, and after each heal measures how long until the tree converges
// (every replica Running at the root, one delegate each, nothing
// terminating); then it counts pods lost, orphans and duplicates. A fault
// watch on every cluster throughout (watchFaults) counts besides what the
// counts after each settle cannot see: two delegates of one pod alive at
// once, a root pod gone without a deletion, a delegate outliving its
// parent past orphanGrace, each with its worst duration.
//
//	go test ./test/e2e/faults -run '^$' -bench Partitions -benchtime 1x
func BenchmarkPartitions(b *testing.B) {
	const replicas, rounds = 6, 3
	ctx := b.Context()
	link := tree.Link("east", "root")
	for b.Loop() {
		ns := fmt.Sprintf("bench-part-%d", time.Now().UnixNano()%1_000_000)
		if err := env.Cluster("root").EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		if _, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "bench", replicas), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		settle(b, ns, replicas, 2*time.Minute)
		watch := watchFaults(b, ns)
		var short, long []time.Duration
		var lost, orphans, dups int
		count := func() {
			live, o, d, err := census(ctx, ns)
			if err != nil {
				b.Fatal(err)
			}
			lost += max(0, replicas-live)
			orphans += o
			dups += d
		}
		for range rounds {
			if err := link.Cut(); err != nil {
				b.Fatal(err)
			}
			time.Sleep(graceSeconds / 2 * time.Second)
			if err := link.Restore(); err != nil {
				b.Fatal(err)
			}
			healed := time.Now()
			settle(b, ns, replicas, 2*time.Minute)
			short = append(short, time.Since(healed))
			count()

			if err := link.Cut(); err != nil {
				b.Fatal(err)
			}
			err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				live, _, err := podsOf(ctx, "west", ns)
				return err == nil && len(live) == replicas, nil
			})
			if rerr := link.Restore(); rerr != nil || err != nil {
				b.Fatalf("long partition: replaced in west: %v; restore: %v", err, rerr)
			}
			healed = time.Now()
			settle(b, ns, replicas, 2*time.Minute)
			long = append(long, time.Since(healed))
			count()
			// Back to both regions for the next round.
			scale(b, ns, 0)
			settle(b, ns, 0, 2*time.Minute)
			scale(b, ns, replicas)
			settle(b, ns, replicas, 2*time.Minute)
		}
		b.StopTimer()
		watched := watch.Stop()
		b.Logf("faults watched throughout: %s", watched)
		b.ReportMetric(float64(watched.Duplicates.N), "partition-watched-duplicates")
		b.ReportMetric(float64(watched.Duplicates.Worst.Milliseconds()), "partition-watched-duplicate-worst-ms")
		b.ReportMetric(float64(watched.Vanished.N), "partition-watched-vanished")
		b.ReportMetric(float64(watched.Orphans.N), "partition-watched-orphans")
		b.ReportMetric(float64(watched.Orphans.Worst.Milliseconds()), "partition-watched-orphan-worst-ms")
		sp50, sp99 := framework.Percentiles(short)
		lp50, lp99 := framework.Percentiles(long)
		b.ReportMetric(sp50, "short-partition-converge-p50-ms")
		b.ReportMetric(sp99, "short-partition-converge-p99-ms")
		b.ReportMetric(lp50, "long-partition-converge-p50-ms")
		b.ReportMetric(lp99, "long-partition-converge-p99-ms")
		b.ReportMetric(float64(lost), "partition-pods-lost")
		b.ReportMetric(float64(orphans), "partition-orphans")
		b.ReportMetric(float64(dups), "partition-duplicates")
		b.ReportMetric(0, "ns/op")
		_ = env.Cluster("root").Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		b.StartTimer()
	}
}

// scale sets the replicas of Deployment bench, again on a conflict (the
// deployment controller writes its status in between).
func scale(tb testing.TB, ns string, replicas int32) {
	tb.Helper()
	deployments := env.Cluster("root").Client.AppsV1().Deployments(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := deployments.GetScale(tb.Context(), "bench", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = deployments.UpdateScale(tb.Context(), "bench", s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
}
