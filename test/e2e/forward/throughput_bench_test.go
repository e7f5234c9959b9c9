package forward

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkThroughput1000: a 1,000-replica Deployment created at the root
// of the 3-level tree, from the create to all 1,000 pods Running at the
// root, against the same Deployment in one flat cluster (stock
// kube-scheduler) with the same kwok nodes (12 nodes of 110 pods: the
// tree's leaves get one more node each first), in the same run. The ratio
// is throughput, flat time / tree time (>= 0.7 is the target).
func BenchmarkThroughput1000(b *testing.B) {
	const replicas = 1000
	ctx := b.Context()
	leaves := []string{"east-1", "east-2", "west-1", "west-2"}
	region := map[string]string{"east-1": "east", "east-2": "east", "west-1": "west", "west-2": "west"}
	var flatNodes []launcher.NodeOptions
	for _, l := range leaves {
		for _, suffix := range []string{"a", "b", "c"} {
			flatNodes = append(flatNodes, launcher.NodeOptions{Name: "flat-" + l + "-" + suffix,
				Labels: map[string]string{"topology.kubernetes.io/region": region[l], "topology.kubernetes.io/zone": l + "-" + suffix}})
		}
		_, err := env.Cluster(l).AddNode(ctx, launcher.NodeOptions{Name: l + "-c",
			Labels: map[string]string{"topology.kubernetes.io/region": region[l], "topology.kubernetes.io/zone": l + "-c"}})
		if err != nil {
			b.Fatal(err)
		}
	}
	profiling := os.Getenv("NESTLET_PROFILE_DIR") != ""
	if err := env.AddClusters(ctx, launcher.ClusterOptions{Name: "flat", StockScheduler: true, Nodes: flatNodes, ControllerManagerArgs: kwokGrace,
		Profiling: profiling, SchedulerMetrics: profiling}); err != nil {
		b.Fatal(err)
	}
	// The tree's summaries include the new nodes before the run.
	framework.EventuallyEvery(b, 500*time.Millisecond, 2*time.Minute, "the root's virtual nodes show the added capacity", func(ctx context.Context) (bool, string) {
		pods := int64(0)
		for _, n := range []string{"east", "west"} {
			node, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			pods += node.Status.Allocatable.Pods().Value()
		}
		return pods >= 12*110, fmt.Sprintf("%d pods allocatable", pods)
	})

	run := func(cluster string) (time.Duration, framework.Costs) {
		c := env.Cluster(cluster)
		ns := fmt.Sprintf("tp-%d", time.Now().UnixNano()%1_000_000_000)
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		s := framework.NewPodTimes()
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s.Follow(fctx, b, c.Client, ns)
		d := tpDeployment(ns, replicas)
		var flaps atomic.Int32
		if cluster == "root" {
			for _, l := range leaves {
				watchReady(fctx, b, l, &flaps)
			}
		}
		cpu0 := framework.CPUByKind(env)
		writes0 := writesByCluster(ctx)
		costs0, err := framework.MeasureCosts(ctx, env)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		// With NESTLET_PROFILE_DIR set: CPU profiles from the start (the
		// tree's slower run for 30 s, the flat one for 15 s).
		profiled := func() {}
		switch cluster {
		case "root":
			profiled = profileAgents(b, []string{"root", "east", "east-1"}, 30*time.Second)
		case "flat":
			profiled = profileAgents(b, []string{"flat"}, 15*time.Second)
		}
		s.WaitRunning(ctx, b, replicas)
		took := time.Since(start)
		profiled()
		cpu1 := framework.CPUByKind(env)
		costs1, err := framework.MeasureCosts(ctx, env)
		if err != nil {
			b.Fatal(err)
		}
		costs := costs1.Sub(costs0)
		if cluster == "root" {
			// API writes per pod by resource, in every cluster of the tree.
			byResource := map[string]float64{}
			for c, w := range writesByCluster(ctx) {
				if c == "flat" {
					continue
				}
				for r, n := range w {
					byResource[r] += n - writes0[c][r]
				}
			}
			for r, n := range byResource {
				if n/replicas >= 0.05 {
					b.ReportMetric(n/replicas, "tree-writes-per-pod-"+r)
				}
			}
			// Events by reason, in every cluster of the tree (the
			// namespace has the same name at every level).
			byReason := map[string]float64{}
			for _, tc := range env.Clusters() {
				if tc.Name == "flat" {
					continue
				}
				evs, err := tc.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					continue
				}
				here := map[string]int32{}
				for _, e := range evs.Items {
					byReason[e.Reason] += float64(max(e.Count, 1))
					here[e.Reason+" ("+e.Source.Component+")"] += max(e.Count, 1)
				}
				b.Logf("events in %s: %v", tc.Name, here)
			}
			for r, n := range byReason {
				if n/replicas >= 0.05 {
					b.ReportMetric(n/replicas, "tree-events-per-pod-"+r)
				}
			}
		} else {
			for r, n := range writesByCluster(ctx)[cluster] {
				if d := n - writes0[cluster][r]; d/replicas >= 0.05 {
					b.ReportMetric(d/replicas, "flat-writes-per-pod-"+r)
				}
			}
		}
		// CPU seconds used by every process of the environment (both
		// topologies run throughout), by kind: where the time goes.
		for kind, t := range cpu1 {
			b.ReportMetric((t - cpu0[kind]).Seconds(), fmt.Sprintf("%s-cpu-s-%s", cluster, kind))
		}
		lastBound := start
		s.Lock()
		for _, t := range s.Bound {
			if t.After(lastBound) {
				lastBound = t
			}
		}
		s.Unlock()
		b.ReportMetric(float64(lastBound.Sub(start).Milliseconds()), cluster+"-all-bound-ms")
		if cluster == "root" {
			// kwok nodes of the leaves seen leaving Ready during the run
			// (see kwokGrace): 0 when the environment did not interfere.
			b.ReportMetric(float64(flaps.Load()), "tree-leaf-nodes-not-ready")
		}
		// Scheduling attempts that found no node: each sends the pod to
		// the back-off queue.
		if evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"}); err == nil {
			n := int32(0)
			for _, e := range evs.Items {
				n += max(e.Count, 1)
				if n <= 3 {
					b.Logf("%s: %s", cluster, e.Message)
				}
			}
			b.ReportMetric(float64(n), cluster+"-failed-scheduling")
		}
		b.StopTimer()
		deleteTP(ctx, b, c.Client, ns)
		b.StartTimer()
		return took, costs
	}
	// The clusters' idle CPU, once whatever ran before (the flat cluster
	// and nodes just added, an earlier benchmark's namespaces being
	// emptied) has ended: 20 s windows until one is no longer falling,
	// for at most 3 minutes.
	idle, windows, err := framework.IdleCores(ctx, env, 20*time.Second, 3*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("idle CPU of the whole environment, in cores, by 20 s window until it stopped falling: %.3f", windows)
	b.ReportMetric(float64(len(windows)), "idle-windows-measured")
	for b.Loop() {
		flat, flatCost := run("flat")
		tree, treeCost := run("root")
		// Per cluster, as if each had its own machine: the tree's
		// clusters (and the shared etcd) during the tree's run, the flat
		// cluster during its own. The ratio that matters then is the
		// busiest cluster of the tree against the flat cluster.
		var treeNames []string
		for _, c := range env.Clusters() {
			if c.Name != "flat" {
				treeNames = append(treeNames, c.Name)
			}
		}
		treeCost.Report(b, "tree", append(treeNames, framework.SharedEtcd), replicas)
		flatCost.Report(b, "flat", []string{"flat", framework.SharedEtcd}, replicas)
		busiest := treeCost.Busiest(treeNames)
		b.Logf("busiest cluster of the tree: %s (%s CPU, %.0f requests) against flat %s CPU, %.0f requests",
			busiest, treeCost[busiest].TotalCPU().Round(time.Millisecond), treeCost[busiest].Requests, flatCost["flat"].TotalCPU().Round(time.Millisecond), flatCost["flat"].Requests)
		b.ReportMetric(treeCost[busiest].TotalCPU().Seconds()/flatCost["flat"].TotalCPU().Seconds(), "busiest-tree-cluster-vs-flat-cpu")
		b.ReportMetric(treeCost[busiest].Requests/flatCost["flat"].Requests, "busiest-tree-cluster-vs-flat-requests")
		reportSummed(b, treeNames, tree, treeCost, flat, flatCost, idle)
		b.ReportMetric(float64(tree.Milliseconds()), "deploy1000-3level-ms")
		b.ReportMetric(float64(flat.Milliseconds()), "deploy1000-flat-ms")
		b.ReportMetric(replicas/tree.Seconds(), "deploy1000-3level-pods/s")
		b.ReportMetric(replicas/flat.Seconds(), "deploy1000-flat-pods/s")
		ownCPUThroughput(ctx, b, replicas, treeNames)
	}
	b.ReportMetric(0, "ns/op")
}

// ownCPUThroughput deploys the same replicas again, in the flat cluster
// and then at the root of the tree, with every cluster limited to the same
// share of a core (launcher LimitCPU; NESTLET_THROUGHPUT_CLUSTER_CORES,
// 0.25 by default, so that the tree's seven clusters fit in this machine's
// two cores at once): each cluster as if on a small machine of its own.
// The tree then has seven such machines and the flat cluster one, so the
// figure does not say that a tree needs less CPU (tree-summed-vs-flat-cpu
// says what it needs); it says whether its levels work on their pods side
// by side, so that the tree deploys about as fast as its busiest cluster
// (the root, which does about the flat cluster's work per pod) allows,
// instead of every level waiting for the one above. Reported as
// own-cpu-deploy1000-*, with the busiest cluster's CPU in the limited run
// against the flat cluster's. The shared etcd, this program and kwok (the
// simulated kubelets: the workers' work, which the flat cluster has and
// the upper levels do not) are not limited; the limit is lifted before
// the pods are deleted.
func ownCPUThroughput(ctx context.Context, b *testing.B, replicas int32, treeNames []string) {
	b.Helper()
	cores := coresFromEnv(b, "NESTLET_THROUGHPUT_CLUSTER_CORES", 0.25)
	took, busiest := map[string]time.Duration{}, map[string]time.Duration{}
	for _, cluster := range []string{"flat", "root"} {
		c := env.Cluster(cluster)
		ns := fmt.Sprintf("tp-own-%d", time.Now().UnixNano()%1_000_000_000)
		require.NoError(b, c.EnsureNamespace(ctx, ns))
		s := framework.NewPodTimes()
		fctx, cancel := context.WithCancel(ctx)
		s.Follow(fctx, b, c.Client, ns)
		unlimit := limitCPU(b, cores, (*launcher.Environment).LimitCPU)
		costs0, err := framework.MeasureCosts(ctx, env)
		require.NoError(b, err)
		start := time.Now()
		_, err = c.Client.AppsV1().Deployments(ns).Create(ctx, tpDeployment(ns, replicas), metav1.CreateOptions{})
		require.NoError(b, err)
		s.WaitRunning(ctx, b, int(replicas))
		took[cluster] = time.Since(start)
		costs1, err := framework.MeasureCosts(ctx, env)
		require.NoError(b, err)
		unlimit()
		cancel()
		// The busiest cluster's CPU: at most cores x the time taken.
		costs := costs1.Sub(costs0)
		names := []string{"flat"}
		if cluster == "root" {
			names = treeNames
		}
		name := costs.Busiest(names)
		busiest[cluster] = costs[name].TotalCPU()
		b.Logf("limited to %.2f core per cluster: %d replicas Running in %s in %s; busiest cluster %s, %s CPU",
			cores, replicas, cluster, took[cluster].Round(time.Millisecond), name, busiest[cluster].Round(time.Millisecond))
		deleteTP(ctx, b, c.Client, ns)
	}
	b.ReportMetric(cores, "own-cpu-throughput-cores-per-cluster")
	b.ReportMetric(float64(took["root"].Milliseconds()), "own-cpu-deploy1000-3level-ms")
	b.ReportMetric(float64(took["flat"].Milliseconds()), "own-cpu-deploy1000-flat-ms")
	b.ReportMetric(float64(replicas)/took["root"].Seconds(), "own-cpu-deploy1000-3level-pods/s")
	b.ReportMetric(float64(replicas)/took["flat"].Seconds(), "own-cpu-deploy1000-flat-pods/s")
	b.ReportMetric(busiest["root"].Seconds()/busiest["flat"].Seconds(), "own-cpu-busiest-tree-cluster-vs-flat-cpu")
}

// tpDeployment is Throughput1000's Deployment: the package's plain
// Deployment of replicas pods, in either region instead of one (in the
// tree: on the virtual nodes, not on root's own node).
func tpDeployment(ns string, replicas int32) *appsv1.Deployment {
	d := deployment(ns, "tp", replicas, "")
	d.Spec.Template.Spec.NodeSelector = nil
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "topology.kubernetes.io/region", Operator: corev1.NodeSelectorOpIn, Values: []string{"east", "west"}}}}}}}}
	return d
}

// deleteTP deletes Throughput1000's Deployment and its namespace ns and
// waits until no cluster has a pod of it left: deleting 1,000 pods (and,
// in the tree, their delegates) would take CPU from the next run.
func deleteTP(ctx context.Context, b *testing.B, client kubernetes.Interface, ns string) {
	b.Helper()
	_ = client.AppsV1().Deployments(ns).Delete(context.WithoutCancel(ctx), "tp", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	_ = client.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{})
	waitNoPods(ctx, b, ns)
}

// writesByCluster returns, per cluster, the number of write requests so
// far by resource[/subresource]-verb.
func writesByCluster(ctx context.Context) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, c := range env.Clusters() {
		all, err := framework.Requests(ctx, c)
		if err != nil {
			continue
		}
		w := map[string]float64{}
		for k, n := range all {
			if framework.IsWrite(k) {
				w[k] = n
			}
		}
		out[c.Name] = w
	}
	return out
}

// watchReady logs every change of a node's Ready condition in cluster,
// and counts those away from True in flaps.
func watchReady(ctx context.Context, b *testing.B, cluster string, flaps *atomic.Int32) {
	w, err := env.Cluster(cluster).Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		defer w.Stop()
		last := map[string]corev1.ConditionStatus{}
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && last[n.Name] != c.Status {
					if last[n.Name] != "" {
						if c.Status != corev1.ConditionTrue {
							flaps.Add(1)
						}
						b.Logf("%s: node %s Ready %s -> %s (%s: %s)", cluster, n.Name, last[n.Name], c.Status, c.Reason, c.Message)
					}
					last[n.Name] = c.Status
				}
			}
		}
	}()
}

// reportSummed reports the tree's CPU summed over its clusters against the
// flat cluster's for the same replicas (the shared etcd, which serves
// both, left out of both), and the same with each cluster's idle CPU
// (framework.IdleCores, times how long its run took) taken out of both sides: the
// part that grows with the pods, against the part every cluster pays
// whether it holds pods or not, and for longer the longer a run takes.
func reportSummed(b *testing.B, treeNames []string, tree time.Duration, treeCost framework.Costs, flat time.Duration, flatCost framework.Costs, idle map[string]float64) {
	b.Helper()
	var treeCPU, treeIdle, treeIdleCores float64
	for _, n := range treeNames {
		treeCPU += treeCost[n].TotalCPU().Seconds()
		treeIdle += idle[n] * tree.Seconds()
		treeIdleCores += idle[n]
	}
	flatCPU := flatCost["flat"].TotalCPU().Seconds()
	flatIdle := idle["flat"] * flat.Seconds()
	b.ReportMetric(treeCPU/flatCPU, "tree-summed-vs-flat-cpu")
	b.ReportMetric(treeIdleCores/float64(len(treeNames)), "idle-cores-per-tree-cluster")
	b.ReportMetric(idle["flat"], "idle-cores-flat")
	if treeCPU > treeIdle && flatCPU > flatIdle {
		b.ReportMetric((treeCPU-treeIdle)/(flatCPU-flatIdle), "tree-summed-vs-flat-cpu-less-idle")
	}
	b.Logf("CPU summed over the clusters (etcd left out): tree %.1f s in %.1f s, of which idle %.1f s (%d clusters, %.3f cores each); flat %.1f s in %.1f s, of which idle %.1f s",
		treeCPU, tree.Seconds(), treeIdle, len(treeNames), treeIdleCores/float64(len(treeNames)), flatCPU, flat.Seconds(), flatIdle)
	reportFloor(b, treeNames, treeCost, flatCost["flat"], treeCPU, treeIdle)
}

// treeLevels is the depth of the tree Throughput1000 deploys to: every pod is
// a pod of the root, of a middle cluster and of a leaf.
const treeLevels = 3

// reportFloor reports what the tree would cost if each level did exactly
// the flat cluster's work for every pod it holds, and nothing more: an API
// server and a scheduler per level, the kubelets (kwok) and the controller
// manager (the Deployment and its ReplicaSet) once. No agent, and no idle
// work of the six clusters more than the flat one. Every part is the flat
// cluster's, measured in the same run. It is the least a tree with a real
// pod at every level, placed by that level's scheduler, can spend; what
// the tree spends above it is logged by component.
//
// Against it, two goals: the tree's CPU summed over its clusters
// (treeCPU) at most 1.15 times the floor (tree-vs-floor-cpu), and
// Nestlet's own processes, the agents and proxies (gateways and route
// agents run inside the agents), at most a tenth of it
// (nestlet-share-of-tree-cpu).
func reportFloor(b *testing.B, treeNames []string, treeCost framework.Costs, flat framework.ClusterCost, treeCPU, treeIdle float64) {
	b.Helper()
	// How many times the floor counts each component of the flat cluster.
	times := map[string]float64{"kube-apiserver": treeLevels, "kube-scheduler": treeLevels, "kwok": 1, "kube-controller-manager": 1}
	floor := map[string]float64{}
	var total float64
	for k, n := range times {
		floor[k] = n * flat.CPU[k].Seconds()
		total += floor[k]
	}
	if total == 0 {
		b.Log("no CPU measured in the flat cluster: no floor")
		return
	}
	b.ReportMetric(total/flat.TotalCPU().Seconds(), "tree-floor-vs-flat-cpu")
	b.ReportMetric(treeCPU/total, "tree-vs-floor-cpu")
	spent := treeCost.Sum(treeNames).CPU
	if treeCPU > 0 {
		own := spent[launcher.ComponentAgent] + spent[launcher.ComponentProxy]
		b.ReportMetric(own.Seconds()/treeCPU, "nestlet-share-of-tree-cpu")
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(spent)) {
		if d := spent[k].Seconds() - floor[k]; math.Abs(d) >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %+.1f s", k, d))
		}
	}
	b.Logf("floor %.1f s (%d levels' API servers and schedulers, kwok and the controller manager once, each as in the flat cluster); the tree above it by component: %s; the tree's idle, %.1f s, is part of those",
		total, treeLevels, strings.Join(parts, ", "), treeIdle)
}
