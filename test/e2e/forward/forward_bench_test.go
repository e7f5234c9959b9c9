package forward

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkForwardingLatency measures, over 200 pods created at the root of
// the 3-level tree (10 creates in flight): per-hop latency (pod bound at one
// level -> its delegate seen at the next), status latency on the way back up
// (Running at one level -> Running at the level above), and end-to-end
// latency (created at the root -> Running at the root, 2 hops), against the
// same 200 pods created directly in a leaf given the other leaf's nodes
// too (flatLeaf: one cluster with the nodes the 2-hop run spreads its pods
// over), and created one level up (in
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
		if err := env.Cluster("east-1").EnsureNamespace(ctx, direct); err != nil {
			b.Fatal(err)
		}

		// Baseline: the same pods directly in a leaf that has both
		// leaves' nodes (flatLeaf).
		leaf := framework.NewPodTimes()
		leaf.Follow(ctx, b, env.Cluster("east-1").Client, direct)
		unflat := flatLeaf(ctx, b)
		cpu0 := framework.CPUByKind(env)
		leafCreated := framework.CreatePods(ctx, b, env.Cluster("east-1").Client, direct, "p", n, spec, 0)
		leaf.WaitRunning(ctx, b, n)
		directCPU := cpuSince(cpu0)
		// Each run starts on an empty tree, as the baseline did: pods left
		// running in east-1 would leave the 2-hop run one leaf with room,
		// and deleting them meanwhile would take its CPU.
		clearNamespace(ctx, b, direct, "east-1")
		unflat()

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

		root, mid, leaves := followTree(ctx, b, nested)
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
		e2ep50, e2ep99 := reportStages(b, "", stageDiffs(rootCreated, root, mid, leaves))
		flatp50, flatp99 := framework.Percentiles(framework.Diffs(leafCreated, leaf.Running))
		one.Lock()
		onep50, onep99 := framework.Percentiles(framework.Diffs(oneCreated, one.Running))
		oneBind50, oneBind99 := framework.Percentiles(framework.Diffs(oneCreated, one.Bound))
		one.Unlock()
		leaf.Unlock()
		leaves.Unlock()
		mid.Unlock()
		root.Unlock()
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
		// Pods failed by placement, at any level of the 2-hop path
		// (placed by reservation, none should be).
		failed := 0
		for level, pt := range map[string]*framework.PodTimes{"root": root, "east": mid, "the leaves": leaves} {
			n, why := pt.CountFailed()
			if n > 0 {
				b.Logf("%d pods Failed in %s, e.g. %s", n, level, why)
			}
			failed += n
		}
		b.ReportMetric(float64(failed), "e2e-2hop-pods-failed")
		// Scheduling attempts that found no node, at each level of the
		// 2-hop path: each sends its pod to the back-off queue.
		for _, c := range []string{"root", "east", "east-1", "east-2"} {
			b.ReportMetric(failedScheduling(ctx, b, c, nested), "e2e-2hop-failed-scheduling-in-"+c)
		}
		// Seconds requests queued in each API server's priority and
		// fairness during the 2-hop run, summed over its priority levels.
		for c, w := range flowControlWaitsLogged(b, "2-hop burst", wait0, waits) {
			b.ReportMetric(w, "e2e-2hop-apf-wait-s-in-"+c)
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
		// The next runs measure CPU and writes: the 600 pods and their
		// delegates are gone first.
		waitNoPods(ctx, b, nested, direct, oneHop)
		limitedBursts(ctx, b, n, spec, eachItsOwn)
		limitedBursts(ctx, b, n, spec, allTogether)
		b.StartTimer()
	}
}

// stageNames are the stages of the 2-hop path, in order, and the whole
// of it (e2e-2hop: created -> Running at the root). Pods are placed by
// reservation (docs/scheduling.md#placement-by-reservation): root-bind
// (created -> bound at the root) holds the reservation down both levels
// (east and a leaf create the delegate held and hold a place); then each
// level binds once the level above has (east-release: bound at the root ->
// bound in east; leaf-release: bound in east -> bound in a leaf).
var stageNames = []string{"root-bind", "east-release", "leaf-release", "leaf-run", "status-up1", "status-up2", "e2e-2hop"}

// stageDiffs returns, by stage (stageNames), every pod's time in it: each
// a difference of the times a watch saw the pod change, for pods created
// at the root at created (a pod a watch first saw already bound is left
// out of the stages that start or end when it was added: PodTimes.OnTime).
// The PodTimes are locked by the caller.
func stageDiffs(created map[string]time.Time, root, mid, leaves *framework.PodTimes) map[string][]time.Duration {
	return map[string][]time.Duration{
		"root-bind":    framework.Diffs(created, root.Bound),
		"east-release": framework.Diffs(root.Bound, mid.Bound),
		"leaf-release": framework.Diffs(mid.Bound, leaves.Bound),
		"leaf-run":     framework.Diffs(leaves.Bound, leaves.Running),
		"status-up1":   framework.Diffs(leaves.Running, mid.Running),
		"status-up2":   framework.Diffs(mid.Running, root.Running),
		"e2e-2hop":     framework.Diffs(created, root.Running),
	}
}

// reportStages reports the p50 and p99 of every stage of stages, its
// metrics' names prefixed, and returns those of the whole path.
func reportStages(b *testing.B, prefix string, stages map[string][]time.Duration) (e2ep50, e2ep99 float64) {
	b.Helper()
	for _, name := range stageNames {
		p50, p99 := framework.Percentiles(stages[name])
		b.ReportMetric(p50, prefix+name+"-p50-ms")
		b.ReportMetric(p99, prefix+name+"-p99-ms")
	}
	return framework.Percentiles(stages["e2e-2hop"])
}

// followTree follows the pods of namespace ns along the 2-hop path: at
// the root, in east, and in its two leaves.
func followTree(ctx context.Context, b *testing.B, ns string) (root, mid, leaves *framework.PodTimes) {
	b.Helper()
	root, mid, leaves = framework.NewPodTimes(), framework.NewPodTimes(), framework.NewPodTimes()
	for _, c := range []string{"root", "east", "east-1", "east-2"} {
		require.NoError(b, env.Cluster(c).EnsureNamespace(ctx, ns))
	}
	root.Follow(ctx, b, env.Cluster("root").Client, ns)
	mid.Follow(ctx, b, env.Cluster("east").Client, ns)
	leaves.Follow(ctx, b, env.Cluster("east-1").Client, ns)
	leaves.Follow(ctx, b, env.Cluster("east-2").Client, ns)
	return root, mid, leaves
}

// cpuLimit is how the limited bursts hold the clusters to their share of
// the machine: the question they answer.
type cpuLimit struct {
	// prefix names the figures, cores the one of the cores given; env
	// and def give the cores.
	prefix, cores, env string
	def                float64
	limit              func(*launcher.Environment, float64) (func() error, error)
}

var (
	// eachItsOwn: every cluster on a machine of its own, of the same
	// small size (own-cpu-*): do the levels work side by side?
	eachItsOwn = cpuLimit{prefix: "own-cpu-", cores: "cores-per-cluster", env: "NESTLET_BURST_CLUSTER_CORES", def: 0.4, limit: (*launcher.Environment).LimitCPU}
	// allTogether: the whole tree on the cores of one cluster, the leaf
	// baseline on the same (same-cores-*): what does the tree cost on the
	// same machine?
	allTogether = cpuLimit{prefix: "same-cores-", cores: "cores-in-all", env: "NESTLET_BURST_TOTAL_CORES", def: 1, limit: (*launcher.Environment).LimitCPUTogether}
)

// limitedBursts runs the leaf's burst and the 2-hop burst again with the
// clusters held to cores as lim says (launcher LimitCPU: each cluster its
// own share, NESTLET_BURST_CLUSTER_CORES, 0.4 by default; or
// LimitCPUTogether: every cluster in one share, NESTLET_BURST_TOTAL_CORES,
// 1 by default). Each its own is the tree as it would run with each
// cluster on a small machine of its own, every level working on its share
// of the burst beside the others instead of all four busy clusters taking
// turns on this machine's two cores; all together is the tree on the
// machine of one cluster. The leaf's baseline runs under the same limit.
// Three rounds, the leaf first in the first and third, the tree first in
// the second; reported under lim's prefix: the median round's p50 and p99
// of each, the lowest and highest ratio of a round, and every stage over
// the pods of all rounds. The shared etcd, this program and kwok (the
// simulated kubelets: workers' work) are not limited.
func limitedBursts(ctx context.Context, b *testing.B, n int, spec corev1.PodSpec, lim cpuLimit) {
	b.Helper()
	const rounds = 3
	cores := coresFromEnv(b, lim.env, lim.def)
	unlimit := limitCPU(b, cores, lim.limit)

	var flat50, flat99, tree50, tree99, ratio50, ratio99 []float64
	stages := map[string][]time.Duration{}
	for r := range rounds {
		suffix := time.Now().UnixNano() % 1_000_000
		nested, direct := fmt.Sprintf("bench-%snested-%d", lim.prefix, suffix), fmt.Sprintf("bench-%sdirect-%d", lim.prefix, suffix)
		require.NoError(b, env.Cluster("east-1").EnsureNamespace(ctx, direct))
		leafBurst := func() {
			leaf := framework.NewPodTimes()
			leaf.Follow(ctx, b, env.Cluster("east-1").Client, direct)
			unflat := flatLeaf(ctx, b)
			created := framework.CreatePods(ctx, b, env.Cluster("east-1").Client, direct, "p", n, spec, 0)
			leaf.WaitRunning(ctx, b, n)
			clearNamespace(ctx, b, direct, "east-1")
			unflat()
			leaf.Lock()
			defer leaf.Unlock()
			p50, p99 := framework.Percentiles(framework.Diffs(created, leaf.Running))
			flat50, flat99 = append(flat50, p50), append(flat99, p99)
		}
		treeBurst := func() {
			root, mid, leaves := followTree(ctx, b, nested)
			created := framework.CreatePods(ctx, b, env.Cluster("root").Client, nested, "p", n, spec, 0)
			root.WaitRunning(ctx, b, n)
			clearNamespace(ctx, b, nested, "root")
			root.Lock()
			mid.Lock()
			leaves.Lock()
			defer func() { leaves.Unlock(); mid.Unlock(); root.Unlock() }()
			for name, ds := range stageDiffs(created, root, mid, leaves) {
				stages[name] = append(stages[name], ds...)
				if name == "e2e-2hop" {
					p50, p99 := framework.Percentiles(ds)
					tree50, tree99 = append(tree50, p50), append(tree99, p99)
				}
			}
		}
		first := "leaf"
		if r%2 == 0 {
			leafBurst()
			treeBurst()
		} else {
			first = "tree"
			treeBurst()
			leafBurst()
		}
		ratio50, ratio99 = append(ratio50, tree50[r]/flat50[r]), append(ratio99, tree99[r]/flat99[r])
		b.Logf("%slimited to %.2f core, round %d (%s first): leaf p50 %.0f ms, p99 %.0f ms; 2 hops p50 %.0f ms, p99 %.0f ms; ratios %.2f, %.2f",
			lim.prefix, cores, r+1, first, flat50[r], flat99[r], tree50[r], tree99[r], ratio50[r], ratio99[r])
		for _, c := range []string{"root", "east-1"} {
			for _, ns := range []string{nested, direct} {
				_ = env.Cluster(c).Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			}
		}
	}
	unlimit()
	reportStages(b, lim.prefix+"stage-", stages)
	b.ReportMetric(cores, lim.prefix+lim.cores)
	b.ReportMetric(framework.Median(tree50), lim.prefix+"e2e-2hop-p50-ms")
	b.ReportMetric(framework.Median(tree99), lim.prefix+"e2e-2hop-p99-ms")
	b.ReportMetric(framework.Median(flat50), lim.prefix+"direct-leaf-p50-ms")
	b.ReportMetric(framework.Median(flat99), lim.prefix+"direct-leaf-p99-ms")
	b.ReportMetric(slices.Min(ratio50), lim.prefix+"e2e/direct-p50-min")
	b.ReportMetric(slices.Max(ratio50), lim.prefix+"e2e/direct-p50-max")
	b.ReportMetric(slices.Min(ratio99), lim.prefix+"e2e/direct-p99-min")
	b.ReportMetric(slices.Max(ratio99), lim.prefix+"e2e/direct-p99-max")
}

// coresFromEnv is the number of cores the environment variable name
// gives, def when it is unset.
func coresFromEnv(b *testing.B, name string, def float64) float64 {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	cores, err := strconv.ParseFloat(v, 64)
	require.NoError(b, err, name)
	return cores
}

// limitCPU limits the clusters of the environment to cores with limit
// (launcher LimitCPU, LimitCPUTogether) and returns the function that
// lifts the limit; it runs at the benchmark's end too if not called
// before, and only once either way.
func limitCPU(b *testing.B, cores float64, limit func(*launcher.Environment, float64) (func() error, error)) (unlimit func()) {
	b.Helper()
	undo, err := limit(env, cores)
	require.NoError(b, err)
	var once sync.Once
	unlimit = func() { once.Do(func() { require.NoError(b, undo()) }) }
	b.Cleanup(unlimit)
	return unlimit
}

// flowControlWaits reads each cluster's FlowControlWait, by priority level.
func flowControlWaits(b *testing.B, clusters ...string) map[string]map[string]float64 {
	b.Helper()
	out := map[string]map[string]float64{}
	for _, c := range clusters {
		byLevel, err := framework.FlowControlWait(b.Context(), env.Cluster(c))
		require.NoError(b, err)
		out[c] = byLevel
	}
	return out
}

// flowControlWaitsLogged returns, per cluster, the seconds requests
// waited in its priority and fairness queues between two readings, summed
// over its priority levels, and logs (one line: a benchmark keeps ten) the
// levels where they waited.
func flowControlWaitsLogged(b *testing.B, what string, before, after map[string]map[string]float64) map[string]float64 {
	sums := map[string]float64{}
	var waited []string
	for _, c := range slices.Sorted(maps.Keys(after)) {
		var levels []string
		for _, level := range slices.Sorted(maps.Keys(after[c])) {
			d := after[c][level] - before[c][level]
			sums[c] += d
			if d >= 0.01 {
				levels = append(levels, fmt.Sprintf("%s %.2f s", level, d))
			}
		}
		if len(levels) > 0 {
			waited = append(waited, c+": "+strings.Join(levels, ", "))
		}
	}
	if len(waited) > 0 {
		b.Logf("%s: seconds requests waited in priority and fairness queues, by level: %s", what, strings.Join(waited, "; "))
	}
	return sums
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

// flatLeaf gives east-1, where the bursts' baseline runs, east-2's nodes
// too (kwok nodes with the same labels and capacity): the baseline is a
// flat cluster with the nodes the 2-hop run spreads its pods over, not
// one leaf's half of them. The function returned deletes them and waits
// until the root sees east as before, so that the tree's runs do not.
func flatLeaf(ctx context.Context, b *testing.B) (undo func()) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	before := settledEast(ctx, b)
	leaf := env.Cluster("east-1")
	nodes, err := env.Cluster("east-2").Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(b, err)
	var twins []string
	for _, n := range nodes.Items {
		labels := maps.Clone(n.Labels)
		delete(labels, corev1.LabelHostname)
		name := "east-1-twin-of-" + n.Name
		_, err := leaf.AddNode(ctx, launcher.NodeOptions{Name: name, Labels: labels, Capacity: n.Status.Capacity})
		require.NoError(b, err)
		twins = append(twins, name)
	}
	return func() {
		b.StopTimer()
		defer b.StartTimer()
		for _, name := range twins {
			require.NoError(b, leaf.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}))
		}
		waitEastAllocatable(ctx, b, before)
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

// schedulerHTTP reads the test schedulers' /debug/pprof.
var schedulerHTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test schedulers' self-signed certificates

// profileAgents, with NESTLET_PROFILE_DIR set, records CPU profiles of the
// agents, the API servers and the schedulers of clusters over the next d
// into that directory (<cluster>-agent-cpu.pprof,
// <cluster>-apiserver-cpu.pprof, <cluster>-scheduler-cpu.pprof, for `go
// tool pprof`); the function it returns waits for them. Without it, it
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
			if metricsURL[c] == "" { // a cluster without an agent
				return
			}
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
		// The scheduler serves it on its own port (the launcher's
		// SchedulerMetrics, set with NESTLET_PROFILE_DIR).
		wg.Go(func() {
			if env.Cluster(c).SchedulerMetricsURL == "" {
				return
			}
			url := strings.TrimSuffix(env.Cluster(c).SchedulerMetricsURL, "/metrics") + "/debug/pprof/profile?seconds=" + seconds
			file := c + "-scheduler-cpu.pprof"
			if err := framework.SaveProfile(context.Background(), schedulerHTTP, url, filepath.Join(dir, file)); err != nil {
				b.Errorf("profile %s: %v", file, err)
			}
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
