package realleaf

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

const (
	startupPods = 30
	// One pod a second: at 5/s one real kubelet on this 2-core machine
	// queued them (p50 22 s in the leaf itself), which measured its
	// throughput, not a pod's start-up.
	startupEvery = time.Second
)

// BenchmarkRealStartup creates 30 pods of the demo app, paced at 1/s, in
// the leaf (0 hops: the baseline), in mid (1 hop) and at the root (2 hops)
// in turn, and reports, as seen by an informer where they were created,
// created -> Running (startup-running-*: phase Running, the containers
// started) and created -> Ready (startup-ready-*: the Ready condition; the
// pods have no readiness probe, so the kubelet sets it once the containers
// run), p50 and p99; and, for each pod created above the leaf, what the
// hops added to its start-up: its created -> Ready where created less its
// delegate's created -> Ready in the leaf, the same pod's two start-ups
// (startup-ready-added-*, p50 and p99; the goal: at most 300 ms per hop;
// the Kubernetes pod start-up SLO is p99 <= 5 s).
// Then the memory of the real node running the 30 pods of the last run:
// its kubelet, its containerd and the containerd shims (one per pod), and
// the leaf's kwok process beside it.
//
//	go test ./test/e2e/realleaf -run '^$' -bench RealStartup -benchtime 1x
func BenchmarkRealStartup(b *testing.B) {
	framework.NeedRealNodes(b)
	ctx := b.Context()
	spec := appPodSpec()
	spec.Containers[0].ReadinessProbe = nil
	spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
	levels := []string{"leaf", "mid", "root"}
	for b.Loop() {
		for hops, cluster := range levels {
			c := env.Cluster(cluster)
			ns := fmt.Sprintf("bench-%dhop-%d", hops, time.Now().UnixNano()%1_000_000)
			if err := c.EnsureNamespace(ctx, ns); err != nil {
				b.Fatal(err)
			}
			pt := framework.NewPodTimes()
			pt.Follow(ctx, b, c.Client, ns)
			inLeaf := pt // the delegates, under their parent's name
			if hops > 0 {
				inLeaf = framework.NewPodTimes()
				inLeaf.Follow(ctx, b, env.Cluster("leaf").Client, ns)
			}
			created := framework.CreatePods(ctx, b, c.Client, ns, "p", startupPods, spec, startupEvery)
			pt.WaitRunning(ctx, b, startupPods)
			pt.WaitReady(ctx, b, startupPods)
			inLeaf.WaitReady(ctx, b, startupPods)
			pt.Lock()
			runningP50, runningP99 := framework.Percentiles(framework.Diffs(created, pt.Running))
			readyP50, readyP99 := framework.Percentiles(framework.Diffs(created, pt.Ready))
			b.ReportMetric(runningP50, fmt.Sprintf("startup-running-%dhop-p50-ms", hops))
			b.ReportMetric(runningP99, fmt.Sprintf("startup-running-%dhop-p99-ms", hops))
			b.ReportMetric(readyP50, fmt.Sprintf("startup-ready-%dhop-p50-ms", hops))
			b.ReportMetric(readyP99, fmt.Sprintf("startup-ready-%dhop-p99-ms", hops))
			if hops > 0 {
				inLeaf.Lock()
				added := addedByHops(created, pt.Ready, inLeaf.Added, inLeaf.Ready)
				inLeaf.Unlock()
				if len(added) != startupPods {
					b.Fatalf("%d of %d pods have both start-ups recorded", len(added), startupPods)
				}
				addedP50, addedP99 := framework.Percentiles(added)
				b.ReportMetric(addedP50, fmt.Sprintf("startup-ready-added-%dhop-p50-ms", hops))
				b.ReportMetric(addedP99, fmt.Sprintf("startup-ready-added-%dhop-p99-ms", hops))
			}
			pt.Unlock()
			b.StopTimer()
			if hops == len(levels)-1 {
				reportNodeMemory(b)
			}
			removeNamespace(b, ns)
			b.StartTimer()
		}
	}
	b.ReportMetric(0, "ns/op")
}

// removeNamespace deletes ns everywhere and waits until the leaf runs
// none of its pods (the node's pod limit is 110).
func removeNamespace(b *testing.B, ns string) {
	ctx := context.WithoutCancel(b.Context())
	for _, c := range []string{"root", "mid", "leaf"} {
		_ = env.Cluster(c).Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := env.Cluster("leaf").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		b.Fatalf("pods of %s still in the leaf: %v", ns, err)
	}
}

// addedByHops returns, for each pod created above the leaf (created ->
// ready where created), what the hops added to its start-up: that less its
// delegate's own, leafAdded -> leafReady in the leaf.
func addedByHops(created, ready, leafAdded, leafReady map[string]time.Time) []time.Duration {
	var out []time.Duration
	for name, t0 := range created {
		t1, ok1 := ready[name]
		l0, ok2 := leafAdded[name]
		l1, ok3 := leafReady[name]
		if ok1 && ok2 && ok3 {
			out = append(out, t1.Sub(t0)-l1.Sub(l0))
		}
	}
	return out
}

// reportNodeMemory reports the RSS of the real node's kubelet, containerd
// and containerd shims (one per pod: counted and summed), the three
// together, and of the leaf's kwok process, which simulates any number of
// nodes.
func reportNodeMemory(b *testing.B) {
	n := realNode()
	shims, shimRSS, err := framework.ShimsRSS(n.RuntimeSocket())
	if err != nil {
		b.Fatal(err)
	}
	if shims == 0 {
		b.Fatalf("no containerd shim of %s found while it runs %d pods", n.Name, startupPods)
	}
	b.ReportMetric(float64(shims), "real-node-shims")
	b.ReportMetric(float64(shimRSS)/(1<<20), "real-node-shims-MB")
	total := shimRSS
	for name, p := range map[string]*launcher.Process{"kubelet": n.Kubelet, "containerd": n.Containerd} {
		rss, err := framework.RSSBytes(p)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rss)/(1<<20), "real-node-"+name+"-MB")
		total += rss
	}
	b.ReportMetric(float64(total)/(1<<20), "real-node-total-MB")
	for _, p := range env.Cluster("leaf").Processes() {
		if p.Name == "kwok" {
			rss, err := framework.RSSBytes(p)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(rss)/(1<<20), "kwok-process-MB")
		}
	}
}
