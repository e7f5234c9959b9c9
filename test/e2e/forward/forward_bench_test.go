package forward

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
// west: 1 hop), in the same run. Each of the three runs starts on a tree
// with none of the others' pods, and reports the CPU each busy cluster
// used.
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
		// Each run starts on an empty tree, as the baseline did: pods left
		// running in east-1 would leave the 2-hop run one leaf with room,
		// and deleting them meanwhile would take its CPU.
		clearNamespace(ctx, b, direct, "east-1")

		// One level: the same pods created in west (the other region, so
		// that the east leaves keep room for the 2-hop run), forwarded once.
		westSpec := *spec.DeepCopy()
		westSpec.NodeSelector = map[string]string{"topology.kubernetes.io/region": "west"}
		one := framework.NewPodTimes()
		one.Follow(ctx, b, env.Cluster("west").Client, oneHop)
		costs0 := measureCosts(b)
		oneCreated := framework.CreatePods(ctx, b, env.Cluster("west").Client, oneHop, "p", n, westSpec, 0)
		one.WaitRunning(ctx, b, n)
		oneCosts := measureCosts(b).Sub(costs0)
		clearNamespace(ctx, b, oneHop, "west")

		root, mid, leaves := framework.NewPodTimes(), framework.NewPodTimes(), framework.NewPodTimes()
		root.Follow(ctx, b, env.Cluster("root").Client, nested)
		mid.Follow(ctx, b, env.Cluster("east").Client, nested)
		leaves.Follow(ctx, b, env.Cluster("east-1").Client, nested)
		leaves.Follow(ctx, b, env.Cluster("east-2").Client, nested)
		profiled := profileAgents(b, []string{"root", "east", "east-1", "east-2"}, 15*time.Second)
		cpu0, costs0 = framework.CPUByKind(env), measureCosts(b)
		wait0 := flowControlWaits(b, "root", "east", "east-1", "east-2")
		rootCreated := framework.CreatePods(ctx, b, env.Cluster("root").Client, nested, "p", n, spec, 0)
		root.WaitRunning(ctx, b, n)
		nestedCPU, nestedCosts := cpuSince(cpu0), measureCosts(b).Sub(costs0)
		waits := flowControlWaits(b, "root", "east", "east-1", "east-2")
		profiled()

		b.StopTimer()
		root.Lock()
		mid.Lock()
		leaves.Lock()
		leaf.Lock()
		hop1p50, hop1p99 := framework.Percentiles(framework.Diffs(root.Bound, mid.Added))
		hop2p50, hop2p99 := framework.Percentiles(framework.Diffs(mid.Bound, leaves.Added))
		midBind50, midBind99 := framework.Percentiles(framework.Diffs(mid.Added, mid.Bound))
		leafBind50, leafBind99 := framework.Percentiles(framework.Diffs(leaves.Added, leaves.Bound))
		leafRun50, leafRun99 := framework.Percentiles(framework.Diffs(leaves.Bound, leaves.Running))
		up1p50, up1p99 := framework.Percentiles(framework.Diffs(leaves.Running, mid.Running))
		up2p50, up2p99 := framework.Percentiles(framework.Diffs(mid.Running, root.Running))
		sched50, sched99 := framework.Percentiles(framework.Diffs(rootCreated, root.Bound))
		e2ep50, e2ep99 := framework.Percentiles(framework.Diffs(rootCreated, root.Running))
		flatp50, flatp99 := framework.Percentiles(framework.Diffs(leafCreated, leaf.Running))
		one.Lock()
		onep50, onep99 := framework.Percentiles(framework.Diffs(oneCreated, one.Running))
		oneBind50, oneBind99 := framework.Percentiles(framework.Diffs(oneCreated, one.Bound))
		one.Unlock()
		leaf.Unlock()
		leaves.Unlock()
		mid.Unlock()
		root.Unlock()
		b.ReportMetric(hop1p50, "hop1-p50-ms")
		b.ReportMetric(hop1p99, "hop1-p99-ms")
		b.ReportMetric(hop2p50, "hop2-p50-ms")
		b.ReportMetric(hop2p99, "hop2-p99-ms")
		// Every stage of the 2-hop path, in order: root-bind, hop1,
		// east-bind, hop2, leaf-bind, leaf-run, status-up1, status-up2.
		b.ReportMetric(midBind50, "east-bind-p50-ms")
		b.ReportMetric(midBind99, "east-bind-p99-ms")
		b.ReportMetric(leafBind50, "leaf-bind-p50-ms")
		b.ReportMetric(leafBind99, "leaf-bind-p99-ms")
		b.ReportMetric(leafRun50, "leaf-run-p50-ms")
		b.ReportMetric(leafRun99, "leaf-run-p99-ms")
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
		b.ReportMetric(oneBind50, "west-bind-p50-ms")
		b.ReportMetric(oneBind99, "west-bind-p99-ms")
		// Which cluster does the work: each busy cluster's processes (its
		// API server, controller manager, scheduler, kwok, agent).
		for _, c := range []string{"west", "west-1", "west-2"} {
			b.ReportMetric(oneCosts[c].TotalCPU().Seconds(), "e2e-1hop-cpu-s-in-"+c)
		}
		for _, c := range []string{"root", "east", "east-1", "east-2"} {
			b.ReportMetric(nestedCosts[c].TotalCPU().Seconds(), "e2e-2hop-cpu-s-in-"+c)
		}
		b.ReportMetric(flatp50, "direct-leaf-p50-ms")
		b.ReportMetric(flatp99, "direct-leaf-p99-ms")
		// Scheduling attempts that found no node, at each level of the
		// 2-hop path: each sends its pod to the back-off queue.
		for _, c := range []string{"root", "east", "east-1", "east-2"} {
			b.ReportMetric(failedScheduling(ctx, b, c, nested), "e2e-2hop-failed-scheduling-in-"+c)
		}
		// Seconds requests queued in each API server's priority and
		// fairness during the 2-hop run, summed over its priority levels.
		for c, w := range waits {
			b.ReportMetric(w-wait0[c], "e2e-2hop-apf-wait-s-in-"+c)
		}
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

// flowControlWaits reads each cluster's FlowControlWait, summed over its
// priority levels.
func flowControlWaits(b *testing.B, clusters ...string) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	for _, c := range clusters {
		byLevel, err := framework.FlowControlWait(b.Context(), env.Cluster(c))
		require.NoError(b, err)
		for _, s := range byLevel {
			out[c] += s
		}
	}
	return out
}

// failedScheduling counts the FailedScheduling events of namespace ns in
// cluster c, and logs the first messages.
func failedScheduling(ctx context.Context, b *testing.B, c, ns string) float64 {
	b.Helper()
	evs, err := env.Cluster(c).Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	require.NoError(b, err)
	n := int32(0)
	for _, e := range evs.Items {
		n += max(e.Count, 1)
		if n <= 3 {
			b.Logf("%s: %s: %s", c, e.InvolvedObject.Name, e.Message)
		}
	}
	return float64(n)
}

// clearNamespace deletes the pods of namespace ns in clusters, where they
// were created (their delegates below follow), and waits until no cluster
// holds one.
func clearNamespace(ctx context.Context, b *testing.B, ns string, clusters ...string) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	for _, c := range clusters {
		require.NoError(b, env.Cluster(c).Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	}
	waitNoPods(ctx, b, ns)
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

// profileAgents, with NESTLET_PROFILE_DIR set, records CPU profiles of the
// agents and the API servers of clusters over the next d into that
// directory (<cluster>-agent-cpu.pprof, <cluster>-apiserver-cpu.pprof, for
// `go tool pprof`); the function it returns waits for them. Without it, it
// does nothing.
func profileAgents(b *testing.B, clusters []string, d time.Duration) func() {
	b.Helper()
	dir := os.Getenv("NESTLET_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	require.NoError(b, os.MkdirAll(dir, 0o755))
	seconds := strconv.Itoa(int(d.Seconds()))
	var wg sync.WaitGroup
	save := func(file string, raw []byte, err error) {
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, file), raw, 0o644)
		}
		if err != nil {
			b.Errorf("profile %s: %v", file, err)
		}
	}
	for _, c := range clusters {
		url := strings.TrimSuffix(metricsURL[c], "/metrics") + "/debug/pprof/profile?seconds=" + seconds
		wg.Go(func() {
			file := c + "-agent-cpu.pprof"
			if err := framework.SaveProfile(context.Background(), http.DefaultClient, url, filepath.Join(dir, file)); err != nil {
				b.Errorf("profile %s: %v", file, err)
			}
		})
		// kube-apiserver serves /debug/pprof to cluster admins (the
		// launcher's Profiling option, set with NESTLET_PROFILE_DIR).
		wg.Go(func() {
			raw, err := env.Cluster(c).Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", seconds).Timeout(d + time.Minute).DoRaw(context.Background())
			save(c+"-apiserver-cpu.pprof", raw, err)
		})
	}
	return wg.Wait
}

// measureCosts reads every cluster's CPU and requests so far.
func measureCosts(b *testing.B) framework.Costs {
	b.Helper()
	costs, err := framework.MeasureCosts(b.Context(), env)
	require.NoError(b, err)
	return costs
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
