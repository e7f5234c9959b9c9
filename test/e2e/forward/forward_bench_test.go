package forward

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkForwardingLatency measures, over 200 pods created at the root of
// the 3-level tree (10 creates in flight): per-hop latency (pod bound at one
// level -> its delegate seen at the next), status latency on the way back up
// (Running at one level -> Running at the level above), and end-to-end
// latency (created at the root -> Running at the root, 2 hops), against the
// same 200 pods created directly in a leaf, and created one level up (in
// west: 1 hop), in the same run.
//
//	go test ./test/e2e/forward -run '^$' -bench ForwardingLatency -benchtime 1x
func BenchmarkForwardingLatency(b *testing.B) {
	const n = 200
	ctx := b.Context()
	spec := corev1.PodSpec{
		NodeSelector: map[string]string{"topology.kubernetes.io/region": "east"},
		Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
	}
	for b.Loop() {
		suffix := time.Now().UnixNano() % 1_000_000
		nested, direct := fmt.Sprintf("bench-nested-%d", suffix), fmt.Sprintf("bench-direct-%d", suffix)
		oneHop := fmt.Sprintf("bench-onehop-%d", suffix)
		for _, c := range []string{"west", "west-1", "west-2"} {
			if err := env.Cluster(c).EnsureNamespace(ctx, oneHop); err != nil {
				b.Fatal(err)
			}
		}
		for _, c := range []string{"root", "east", "east-1", "east-2"} {
			if err := env.Cluster(c).EnsureNamespace(ctx, nested); err != nil {
				b.Fatal(err)
			}
		}
		if err := env.Cluster("east-1").EnsureNamespace(ctx, direct); err != nil {
			b.Fatal(err)
		}

		// Baseline: the same pods directly in a leaf.
		leaf := framework.NewPodTimes()
		leaf.Follow(ctx, b, env.Cluster("east-1").Client, direct)
		cpu0 := framework.CPUByKind(env)
		leafCreated := framework.CreatePods(ctx, b, env.Cluster("east-1").Client, direct, "p", n, spec, 0)
		leaf.WaitRunning(ctx, b, n)
		directCPU := cpuSince(cpu0)

		// One level: the same pods created in west (the other region, so
		// that the east leaves keep room for the 2-hop run), forwarded once.
		westSpec := *spec.DeepCopy()
		westSpec.NodeSelector = map[string]string{"topology.kubernetes.io/region": "west"}
		one := framework.NewPodTimes()
		one.Follow(ctx, b, env.Cluster("west").Client, oneHop)
		oneCreated := framework.CreatePods(ctx, b, env.Cluster("west").Client, oneHop, "p", n, westSpec, 0)
		one.WaitRunning(ctx, b, n)

		root, mid, leaves := framework.NewPodTimes(), framework.NewPodTimes(), framework.NewPodTimes()
		root.Follow(ctx, b, env.Cluster("root").Client, nested)
		mid.Follow(ctx, b, env.Cluster("east").Client, nested)
		leaves.Follow(ctx, b, env.Cluster("east-1").Client, nested)
		leaves.Follow(ctx, b, env.Cluster("east-2").Client, nested)
		profiled := profileAgents(b, []string{"east", "east-1", "east-2"}, 15*time.Second)
		cpu0 = framework.CPUByKind(env)
		rootCreated := framework.CreatePods(ctx, b, env.Cluster("root").Client, nested, "p", n, spec, 0)
		root.WaitRunning(ctx, b, n)
		nestedCPU := cpuSince(cpu0)
		profiled()

		b.StopTimer()
		root.Lock()
		mid.Lock()
		leaves.Lock()
		leaf.Lock()
		hop1p50, hop1p99 := framework.Percentiles(framework.Diffs(root.Bound, mid.Added))
		hop2p50, hop2p99 := framework.Percentiles(framework.Diffs(mid.Bound, leaves.Added))
		up1p50, up1p99 := framework.Percentiles(framework.Diffs(leaves.Running, mid.Running))
		up2p50, up2p99 := framework.Percentiles(framework.Diffs(mid.Running, root.Running))
		sched50, sched99 := framework.Percentiles(framework.Diffs(rootCreated, root.Bound))
		e2ep50, e2ep99 := framework.Percentiles(framework.Diffs(rootCreated, root.Running))
		flatp50, flatp99 := framework.Percentiles(framework.Diffs(leafCreated, leaf.Running))
		one.Lock()
		onep50, onep99 := framework.Percentiles(framework.Diffs(oneCreated, one.Running))
		one.Unlock()
		leaf.Unlock()
		leaves.Unlock()
		mid.Unlock()
		root.Unlock()
		b.ReportMetric(hop1p50, "hop1-p50-ms")
		b.ReportMetric(hop1p99, "hop1-p99-ms")
		b.ReportMetric(hop2p50, "hop2-p50-ms")
		b.ReportMetric(hop2p99, "hop2-p99-ms")
		b.ReportMetric(sched50, "root-bind-p50-ms")
		b.ReportMetric(sched99, "root-bind-p99-ms")
		b.ReportMetric(up1p50, "status-up1-p50-ms")
		b.ReportMetric(up1p99, "status-up1-p99-ms")
		b.ReportMetric(up2p50, "status-up2-p50-ms")
		b.ReportMetric(up2p99, "status-up2-p99-ms")
		b.ReportMetric(e2ep50, "e2e-2hop-p50-ms")
		b.ReportMetric(e2ep99, "e2e-2hop-p99-ms")
		b.ReportMetric(onep50, "e2e-1hop-p50-ms")
		b.ReportMetric(onep99, "e2e-1hop-p99-ms")
		b.ReportMetric(flatp50, "direct-leaf-p50-ms")
		b.ReportMetric(flatp99, "direct-leaf-p99-ms")
		reportCPU(b, "direct", directCPU)
		reportCPU(b, "e2e-2hop", nestedCPU)
		b.ReportMetric(e2ep50/flatp50, "e2e/direct-p50")
		b.ReportMetric(e2ep99/flatp99, "e2e/direct-p99")
		b.ReportMetric(0, "ns/op")
		for _, c := range []string{"root", "west", "east-1"} {
			for _, ns := range []string{nested, direct, oneHop} {
				_ = env.Cluster(c).Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			}
		}
		// The next benchmark measures CPU and writes: the 600 pods and
		// their delegates are gone first.
		waitNoPods(ctx, b, nested, direct, oneHop)
		b.StartTimer()
	}
}

// waitNoPods waits until no cluster of the tree holds a pod in the
// namespaces.
func waitNoPods(ctx context.Context, b *testing.B, namespaces ...string) {
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, c := range env.Clusters() {
			for _, ns := range namespaces {
				list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
				if err != nil || len(list.Items) > 0 {
					return false, nil //nolint:nilerr // retried
				}
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("the benchmark's pods are not all gone: %v", err)
	}
}

// profileAgents, with NESTLET_PROFILE_DIR set, records a CPU profile of the
// agents of clusters over the next d into that directory
// (<cluster>-agent-cpu.pprof, for `go tool pprof`); the function it
// returns waits for them. Without it, it does nothing.
func profileAgents(b *testing.B, clusters []string, d time.Duration) func() {
	b.Helper()
	dir := os.Getenv("NESTLET_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	require.NoError(b, os.MkdirAll(dir, 0o755))
	var wg sync.WaitGroup
	for _, c := range clusters {
		url := strings.TrimSuffix(metricsURL[c], "/metrics") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds()))
		wg.Go(func() {
			resp, err := http.Get(url) //nolint:gosec,noctx // the test's own agent
			if err != nil {
				b.Errorf("profiling %s's agent: %v", c, err)
				return
			}
			defer func() { _ = resp.Body.Close() }()
			raw, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %s", resp.Status, raw)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, c+"-agent-cpu.pprof"), raw, 0o644)
			}
			if err != nil {
				b.Errorf("profiling %s's agent: %v", c, err)
			}
		})
	}
	return wg.Wait
}

// cpuSince returns the CPU time every process of the environment used
// since before, by kind (framework.CPUByKind).
func cpuSince(before map[string]time.Duration) map[string]time.Duration {
	out := framework.CPUByKind(env)
	for kind, t := range before {
		out[kind] -= t
	}
	return out
}

// reportCPU reports where the CPU went during a run, summed over every
// cluster of the tree by kind of process (<prefix>-cpu-s-kube-apiserver,
// ..., agent, and etcd, shared by all): the whole tree's, idle work of the
// clusters the run did not touch included.
func reportCPU(b *testing.B, prefix string, by map[string]time.Duration) {
	b.Helper()
	var total time.Duration
	for kind, t := range by {
		b.ReportMetric(t.Seconds(), prefix+"-cpu-s-"+kind)
		total += t
	}
	b.ReportMetric(total.Seconds(), prefix+"-cpu-s")
}
