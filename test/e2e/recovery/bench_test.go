package recovery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// delegateCensus counts, over the links root -> mid and mid -> leaf, the
// live delegates whose parent pod is not live (orphans) and the second
// live delegates of one parent pod (duplicates).
func delegateCensus(ctx context.Context, ns string) (orphans, duplicates int, err error) {
	for _, e := range edges {
		parents, _, _, err := livePods(ctx, e[1], ns)
		if err != nil {
			return 0, 0, err
		}
		list, err := env.Cluster(e[0]).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, err
		}
		seen := map[string]int{}
		for _, d := range list.Items {
			if d.DeletionTimestamp != nil || d.Status.Phase == corev1.PodSucceeded || d.Status.Phase == corev1.PodFailed {
				continue
			}
			parent := strings.TrimPrefix(d.Annotations[api.AnnotationParentPod], ns+"/")
			if _, ok := parents[parent]; !ok {
				orphans++
			} else if seen[parent]++; seen[parent] > 1 {
				duplicates++
			}
		}
	}
	return orphans, duplicates, nil
}

// BenchmarkControlPlaneFaults stops a control-plane process for 12 s and
// starts it again with its data, twice for each of: mid's API
// server, mid's etcd, the root's API server; under a 6-replica Deployment
// at the root running in the leaf. For each it reports the time from the
// restart until every level holds the same pods again and mid's summary
// at the root is fresh (and the same from the moment the faulted
// cluster's API server is ready again, which after etcd's restart takes
// the API server's own reconnection), pods lost, orphans and duplicates
// once settled (-settled-), and spurious changes of phase or readiness of
// the root's pods. Over the whole run, watched while the faults happen
// (watched-): delegates alive twice at once at any level, pods vanished
// without a delete, orphans past the GC period, and containers of one pod
// running at once in the leaf's runtime (CRI), each with its worst
// duration. Node certificates are renewed about every 36 s meanwhile (see
// the package).
//
//	go test ./test/e2e/recovery -run '^$' -bench ControlPlaneFaults -benchtime 1x
func BenchmarkControlPlaneFaults(b *testing.B) {
	framework.NeedRealNodes(b)
	const replicas, rounds, down = 6, 2, 12 * time.Second
	faults := []struct{ name, cluster, process string }{
		{"mid-apiserver", "mid", "kube-apiserver"},
		{"mid-etcd", "mid", "etcd"},
		{"root-apiserver", "root", "kube-apiserver"},
	}
	ctx := b.Context()
	for b.Loop() {
		ns := fmt.Sprintf("bench-cp-%d", time.Now().UnixNano()%1_000_000)
		if err := env.Cluster("root").EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		pods, runs := startWatches(b, ns)
		if _, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "bench", replicas), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		type result struct {
			converge, apiReady, afterReady  []time.Duration
			lost, orphans, dups, phaseMoves int
		}
		results := map[string]*result{}
		for _, f := range faults {
			r := &result{}
			results[f.name] = r
			for range rounds {
				waitWhole(b)
				before := settle(b, ns, replicas, 2*time.Minute)
				rec := recordPhases(b, ns)
				p := env.Cluster(f.cluster).Process(f.process)
				p.Stop(10 * time.Second)
				time.Sleep(down)
				if err := p.Restart(); err != nil {
					b.Fatal(err)
				}
				back := time.Now()
				// The faulted cluster's API server serving again: what
				// Nestlet waits for, which after etcd's restart takes the
				// API server's own reconnection.
				err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
					body, err := env.Cluster(f.cluster).Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
					return err == nil && string(body) == "ok", nil
				})
				if err != nil {
					b.Fatalf("%s: %s's API server not ready again: %v", f.name, f.cluster, err)
				}
				serving := time.Now()
				r.apiReady = append(r.apiReady, serving.Sub(back))
				err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
					s := midSummary(b)
					if s == nil {
						return false, nil
					}
					at, err := time.Parse(time.RFC3339, s.Time)
					return err == nil && at.After(back), nil
				})
				if err != nil {
					b.Fatalf("%s: mid's summary not fresh again: %v", f.name, err)
				}
				after := settle(b, ns, replicas, 3*time.Minute)
				r.converge = append(r.converge, time.Since(back))
				r.afterReady = append(r.afterReady, time.Since(serving))
				for id := range before["root"] {
					if after["root"][id] != before["root"][id] {
						r.lost++
					}
				}
				o, d, err := delegateCensus(ctx, ns)
				if err != nil {
					b.Fatal(err)
				}
				r.orphans += o
				r.dups += d
				if changes := rec.Changes(); len(changes) > 0 {
					r.phaseMoves += len(changes)
					b.Logf("%s: pods at the root changed: %s", f.name, strings.Join(changes, "; "))
				}
				rec.stop()
				// Each fault on a tree that has recovered, not within
				// the outage tolerance of the one before (not timed).
				waitLeasesRenewed(b, serving)
			}
		}
		b.StopTimer()
		watched, twice := pods.Stop(), runs.Stop()
		b.Logf("faults watched throughout: %s; containers run twice at once in the leaf's runtime: %s", watched, twice)
		b.ReportMetric(float64(watched.Duplicates.N), "watched-duplicates")
		b.ReportMetric(float64(watched.Duplicates.Worst.Milliseconds()), "watched-duplicates-worst-ms")
		b.ReportMetric(float64(watched.Vanished.N), "watched-vanished")
		b.ReportMetric(float64(watched.Orphans.N), "watched-orphans")
		b.ReportMetric(float64(watched.Orphans.Worst.Milliseconds()), "watched-orphans-worst-ms")
		b.ReportMetric(float64(twice.N), "watched-containers-twice")
		b.ReportMetric(float64(twice.Worst.Milliseconds()), "watched-containers-twice-worst-ms")
		for _, f := range faults {
			r := results[f.name]
			p50, p99 := framework.Percentiles(r.converge)
			b.ReportMetric(p50, f.name+"-converge-p50-ms")
			b.ReportMetric(p99, f.name+"-converge-p99-ms")
			p50, p99 = framework.Percentiles(r.apiReady)
			b.ReportMetric(p50, f.name+"-apiserver-ready-p50-ms")
			b.ReportMetric(p99, f.name+"-apiserver-ready-p99-ms")
			p50, p99 = framework.Percentiles(r.afterReady)
			b.ReportMetric(p50, f.name+"-converge-after-ready-p50-ms")
			b.ReportMetric(p99, f.name+"-converge-after-ready-p99-ms")
			b.ReportMetric(float64(r.lost), f.name+"-pods-lost")
			b.ReportMetric(float64(r.orphans), f.name+"-settled-orphans")
			b.ReportMetric(float64(r.dups), f.name+"-settled-duplicates")
			b.ReportMetric(float64(r.phaseMoves), f.name+"-root-pod-phase-changes")
		}
		b.ReportMetric(0, "ns/op")
		_ = env.Cluster("root").Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		b.StartTimer()
	}
}
