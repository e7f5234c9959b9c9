package scale

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
	"github.com/nestlet/nestlet/test/hollow"
)

// fleet is the shape of BenchmarkFleet.
type fleet struct {
	Fields, LeavesPerField, NodesPerLeaf, Replicas int
}

func (f fleet) leaves() int { return f.Fields * f.LeavesPerField }
func (f fleet) nodes() int  { return f.leaves() * f.NodesPerLeaf }

func (f fleet) fieldName(i int) string { return fmt.Sprintf("field-%02d", i) }
func (f fleet) leafName(field, i int) string {
	return fmt.Sprintf("leaf-%02d-%03d", field, i)
}

// fleetFromEnv reads NESTLET_FLEET (FxLxN) and NESTLET_FLEET_REPLICAS;
// the default is the scale issue's fleet, 10 x 100 x 10, with 2,000
// replicas: on a 2-core machine 10,000 pods through three levels need
// more CPU time than the 20 minutes the benchmark waits for them (2,000
// measure the same costs per pod; NESTLET_FLEET_REPLICAS=10000 is the
// scale issue's whole figure, for a machine that has it).
func fleetFromEnv(b *testing.B) fleet {
	f := fleet{Fields: 10, LeavesPerField: 100, NodesPerLeaf: 10, Replicas: 2_000}
	if v := os.Getenv("NESTLET_FLEET"); v != "" {
		parts := strings.Split(v, "x")
		var nums []int
		for _, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 {
				b.Fatalf("NESTLET_FLEET=%q: want <fields>x<leaves per field>x<nodes per leaf>", v)
			}
			nums = append(nums, n)
		}
		if len(nums) != 3 {
			b.Fatalf("NESTLET_FLEET=%q: want <fields>x<leaves per field>x<nodes per leaf>", v)
		}
		f.Fields, f.LeavesPerField, f.NodesPerLeaf = nums[0], nums[1], nums[2]
	}
	if v := os.Getenv("NESTLET_FLEET_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("NESTLET_FLEET_REPLICAS=%q", v)
		}
		f.Replicas = n
	}
	return f
}

// leafReportFrequency is the hollow leaves' Target spec.reportFrequency,
// what an operator of many children per parent would set (see
// docs/operations.md).
const leafReportFrequency = time.Minute

var nodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110"),
}

// scaleDeployment is the benchmark's Deployment: small pods, no
// nodeSelector (every scheduler spreads over what it has).
func scaleDeployment(replicas int) *appsv1.Deployment {
	labels := map[string]string{"app": "scale"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: "scale"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)), //nolint:gosec // a replica count
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}},
			},
		},
	}
}

// deployResult is what a topology did with the Deployment.
type deployResult struct {
	allRunning time.Duration // -1 when not all ran within the limit
	// runningAtLimit is how many were Running when the limit ended the
	// wait (all of them when they all ran within it).
	runningAtLimit int
	// failed is how many of the cluster's pods were seen Failed (a
	// replica its ReplicaSet replaced), and why one was.
	failed           int
	failedWhy        string
	sched            []time.Duration
	schedUnseen      int // pods first seen bound: timed by the API server's stamps
	apiserverRSSIdle int64
	apiserverRSSPeak int64
	// perPod divides what the run used: the replicas when all ran, else
	// only those Running at the limit (the rest used some of it too: a
	// figure per pod Running, larger than per pod, logged, not reported).
	perPod      int
	cpuPerPodMs float64 // the cluster's every component
	// requestsPerPod, when requestsRead: a cluster the run left too busy
	// to answer for its counters has none.
	requestsPerPod float64
	requestsRead   bool
	// machineCPUPerPodMs is every process of the topology, this one
	// (hollow leaves) included.
	machineCPUPerPodMs float64
	// window is how long costs measures: from before the Deployment was
	// created until the API servers' counters were read after; renewed,
	// the Lease updates this process sent (the hollow leaves') meanwhile.
	window  time.Duration
	renewed renewalWindow
	costs   framework.Costs
}

// BenchmarkFleet measures the fleet (see the package) and, in the same
// run, the same nodes as one flat cluster.
//
// Flat: 10,000 kwok nodes in one cluster (nestlet-scheduler, the same
// profile as every tree cluster), then the Deployment (2,000 replicas by
// default):
// created -> all Running, scheduling latency (created -> bound), its API
// server's RSS idle with the nodes and at peak, CPU and API requests per
// pod of the whole cluster. Its nodes send no heartbeats (kwok without
// leases, a 15-minute grace period): a real 10,000-node cluster would also
// renew 10,000 leases every 10 s, which this machine could not serve
// beside the rest; the baseline is flattered, not the tree.
//
// Tree: root and fields start, then all 1,000 hollow leaves join at once
// (Target created -> virtual node Ready in its field, p50/p99/max, and
// when the last was Ready; the CSR's approval seen in the field); the
// summary annotations' sizes (every leaf's in its field, every field's at
// the root); the Deployment at the root: the same figures for the root,
// and per cluster CPU and requests per pod for the root and the busiest
// field (what each cluster would need of its own machine), beside the
// whole machine's. Ratios against the flat cluster: root memory, CPU per
// pod, scheduling p99, time to all Running. During the joins and the
// deployment, how long this process (the leaves) and the fields' API
// servers waited for a CPU per second they ran (the kernel's run queue):
// which side of a slow answer the machine starved.
//
// Figures only, no timed assertion; everything started is stopped.
func BenchmarkFleet(b *testing.B) {
	f := fleetFromEnv(b)
	b.Logf("fleet: %d fields x %d leaves x %d nodes = %d nodes, %d replicas", f.Fields, f.LeavesPerField, f.NodesPerLeaf, f.nodes(), f.Replicas)
	logger := hollowLogger(b)
	for b.Loop() {
		flat := runFlat(b, f)
		tree := runTree(b, f, &logger)
		for name, r := range map[string]deployResult{"flat": flat, "tree-root": tree} {
			// A run that did not finish says how far it got, not a time.
			if r.allRunning > 0 {
				b.ReportMetric(float64(r.allRunning.Milliseconds()), name+"-all-running-ms")
			} else {
				b.ReportMetric(float64(r.runningAtLimit), name+"-running-after-20min")
			}
			b.ReportMetric(framework.Quantile(r.sched, 0.5), name+"-sched-p50-ms")
			b.ReportMetric(framework.Quantile(r.sched, 0.99), name+"-sched-p99-ms")
			b.ReportMetric(float64(r.schedUnseen), name+"-sched-pods-first-seen-bound")
			b.ReportMetric(float64(r.apiserverRSSIdle)/(1<<20), name+"-apiserver-idle-rss-MiB")
			b.ReportMetric(float64(r.apiserverRSSPeak)/(1<<20), name+"-apiserver-peak-rss-MiB")
			if r.allRunning <= 0 {
				b.Logf("%s: per pod Running at the limit (not reported): CPU %.1f ms, whole machine %.1f ms", name, r.cpuPerPodMs, r.machineCPUPerPodMs)
				continue
			}
			b.ReportMetric(r.cpuPerPodMs, name+"-cpu-ms-per-pod")
			if r.requestsRead {
				b.ReportMetric(r.requestsPerPod, name+"-requests-per-pod")
			}
			b.ReportMetric(r.machineCPUPerPodMs, strings.TrimSuffix(name, "-root")+"-whole-machine-cpu-ms-per-pod")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// runFlat starts the flat cluster, deploys, measures and stops it.
func runFlat(b *testing.B, f fleet) deployResult {
	ctx := b.Context()
	env, err := launcher.Start(ctx, launcher.Config{}, launcher.Spec{Clusters: []launcher.ClusterOptions{{
		Name:                  "flat",
		ControllerManagerArgs: []string{"--node-monitor-grace-period=15m"},
		KwokArgs:              []string{"--node-lease-duration-seconds=0"},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { env.Cleanup(b.Failed(), b.Logf) }()
	c := env.Cluster("flat")
	// An API server with nothing in it yet: what any cluster costs before
	// it holds anything, the root included.
	if empty, err := framework.RSSBytes(c.Process("kube-apiserver")); err == nil {
		b.ReportMetric(float64(empty)/(1<<20), "empty-apiserver-rss-MiB")
	}
	start := time.Now()
	addNodes(ctx, b, c, f)
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "flat-add-nodes-ms")
	r := deployAndMeasure(ctx, b, env, c, f.Replicas)
	logPerPod(b, "flat", r.costs["flat"], r.perPod)
	return r
}

// addNodes creates the fleet's nodes in c (16 at a time), with the labels
// the hollow leaves give theirs, and waits until kwok has them all Ready.
func addNodes(ctx context.Context, b *testing.B, c *launcher.Cluster, f fleet) {
	names := make(chan launcher.NodeOptions)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for o := range names {
				if err := c.CreateNode(ctx, o); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(names)
		for field := range f.Fields {
			for leaf := range f.LeavesPerField {
				zone := f.leafName(field, leaf)
				for n := range f.NodesPerLeaf {
					o := launcher.NodeOptions{Name: fmt.Sprintf("%s-%02d", zone, n), Capacity: nodeCapacity,
						Labels: map[string]string{corev1.LabelTopologyRegion: f.fieldName(field), corev1.LabelTopologyZone: zone}}
					select {
					case names <- o:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		ready := 0
		for i := range nodes.Items {
			if launcher.NodeReady(&nodes.Items[i]) {
				ready++
			}
		}
		return ready >= f.nodes(), nil
	})
	if err != nil {
		b.Fatalf("the flat cluster's %d nodes are not all Ready: %v", f.nodes(), err)
	}
}

// deployAndMeasure creates the Deployment in c and measures it until every
// replica is Running in c (at most 20 minutes): c's cost per pod, and the
// whole environment's (the caller adds what runs in this process).
func deployAndMeasure(ctx context.Context, b *testing.B, env *launcher.Environment, c *launcher.Cluster, replicas int) deployResult {
	apiserver := c.Process("kube-apiserver")
	var r deployResult
	var err error
	if r.apiserverRSSIdle, err = framework.RSSBytes(apiserver); err != nil {
		b.Fatal(err)
	}
	if err := c.EnsureNamespace(ctx, "scale"); err != nil {
		b.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stamps := framework.NewPodTimes()
	stamps.Follow(fctx, b, c.Client, "scale")
	peaks := sampleRSS(fctx, map[string]*launcher.Process{"apiserver": apiserver})
	costs0, err := framework.MeasureCosts(ctx, env)
	if err != nil {
		b.Fatal(err)
	}
	renewed0 := renewals.mark()
	start := time.Now()
	if _, err := c.Client.AppsV1().Deployments("scale").Create(ctx, scaleDeployment(replicas), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Minute, true, func(context.Context) (bool, error) {
		return stamps.CountRunning() >= replicas, nil
	})
	r.allRunning = time.Since(start)
	r.runningAtLimit = stamps.CountRunning()
	r.failed, r.failedWhy = stamps.CountFailed()
	if err != nil {
		b.Logf("%s: %d of %d replicas Running after 20 minutes: it did not keep up", c.Name, r.runningAtLimit, replicas)
		r.allRunning = -time.Millisecond
	}
	// A run that did not keep up leaves the API servers busy: what they
	// cannot answer for within two minutes is left out, not the run.
	costs1 := framework.MeasureCostsOfBusy(ctx, env, 2*time.Minute, b.Logf)
	r.window = time.Since(start)
	r.renewed = renewals.since(renewed0)
	cancel()
	r.apiserverRSSPeak = peaks()["apiserver"]
	d := costs1.Sub(costs0)
	r.costs = d
	r.perPod = replicas
	if r.allRunning <= 0 {
		r.perPod = max(r.runningAtLimit, 1)
	}
	r.cpuPerPodMs = float64(d[c.Name].TotalCPU().Milliseconds()) / float64(r.perPod)
	r.requestsPerPod, r.requestsRead = d[c.Name].Requests/float64(r.perPod), !d[c.Name].RequestsUnread
	var machine time.Duration
	for _, cost := range d {
		machine += cost.TotalCPU()
	}
	r.machineCPUPerPodMs = float64(machine.Milliseconds()) / float64(r.perPod)
	stamps.Lock()
	// Every pod counts: one the watch first saw bound (it fell behind,
	// was dropped and listed again) is timed by the API server's stamps,
	// whole seconds, and counted.
	r.sched = stamps.BoundAfterCreated()
	r.schedUnseen = len(stamps.Late)
	stamps.Unlock()
	return r
}

// runTree starts the root and the fields, joins the hollow leaves, deploys
// at the root, measures and stops everything.
func runTree(b *testing.B, f fleet, logger *klog.Logger) deployResult {
	ctx := b.Context()
	clusters := []launcher.ClusterOptions{{Name: "root"}}
	var edges [][2]string
	var fieldNames []string
	for i := range f.Fields {
		name := f.fieldName(i)
		fieldNames = append(fieldNames, name)
		clusters = append(clusters, launcher.ClusterOptions{Name: name})
		edges = append(edges, [2]string{name, "root"})
	}
	start := time.Now()
	te, err := framework.StartTree(ctx, launcher.Config{}, framework.Tree{Clusters: clusters, Edges: edges})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { te.Cleanup(b.Failed(), b.Logf) }()
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "tree-start-ms")

	req0 := requestsOf(b, te, fieldNames)
	// Who waited for the machine: logged also when the leaves do not all
	// join (before the deferred Cleanup stops the processes).
	queues0, phase := runQueues(te, fieldNames), "while the leaves joined"
	defer func() {
		if b.Failed() {
			reportRunQueues(b, "failed", phase+", until the benchmark failed", queues0, runQueues(te, fieldNames))
		}
	}()
	children, readyAt := joinLeaves(b, te, f, logger)
	queues1 := runQueues(te, fieldNames)
	reportRunQueues(b, "join", phase, queues0, queues1)
	queues0, phase = queues1, "during the deployment"
	// Every request the fields served while the leaves joined (a watch
	// once it ended), per join: the parents' side of a join (the leaves'
	// clusters are simulated).
	if req1 := requestsOf(b, te, fieldNames); req0 != nil && req1 != nil {
		var total float64
		var keys []string
		for k, n := range req1 {
			total += n - req0[k]
			if per := (n - req0[k]) / float64(f.leaves()); per >= 0.1 {
				keys = append(keys, fmt.Sprintf("%s %.2f", k, per))
			}
		}
		slices.Sort(keys)
		b.Logf("the fields' requests per join: %s", strings.Join(keys, ", "))
		b.ReportMetric(total/float64(f.leaves()), "tree-join-field-requests-per-join")
	}
	defer func() {
		var wg sync.WaitGroup
		for _, c := range children {
			wg.Go(c.Stop)
		}
		wg.Wait()
	}()
	summarySizes(b, te, f)

	root := te.Cluster("root")
	self0 := selfCPU()
	lapses0 := readyAt.lapseCount()
	leaseSeconds0 := fieldsLeaseSeconds(ctx, b, te, fieldNames)
	queues0 = runQueues(te, fieldNames)
	r := deployAndMeasure(ctx, b, te.Environment, root, f.Replicas)
	// Placed by reservation, no replica fails for want of a place.
	b.ReportMetric(float64(r.failed), "tree-deploy-pods-failed")
	if r.failed > 0 {
		b.Logf("%d pods of the deployment Failed at the root, e.g. %s", r.failed, r.failedWhy)
	}
	reportRunQueues(b, "deploy", phase, queues0, runQueues(te, fieldNames))
	reportRenewals(b, te, r, fieldNames, f.leaves(), leaseSeconds0)
	self := selfCPU() - self0
	// A field too busy to take its leaves' leases in time marks their
	// nodes not Ready (and, after five minutes, evicts their pods): how
	// often that happened, not an assumption that it did not.
	lapses := readyAt.lapseCount() - lapses0
	b.Logf("leaves' nodes seen going from Ready to not Ready in their fields: %d while they joined, %d during the deployment", lapses0, lapses)
	b.ReportMetric(float64(lapses), "tree-leaf-nodes-not-ready-during-deploy")
	logPerPod(b, "root", r.costs["root"], r.perPod)
	logPerPod(b, "all fields", r.costs.Sum(fieldNames), r.perPod)
	b.Logf("during the deployment, per pod: shared etcd %.1f ms of CPU, this process (the hollow leaves) %.1f ms",
		float64(r.costs[framework.SharedEtcd].TotalCPU().Microseconds())/1000/float64(r.perPod), float64(self.Microseconds())/1000/float64(r.perPod))
	r.machineCPUPerPodMs += float64(self.Milliseconds()) / float64(r.perPod)
	// The busiest field, as if each cluster had its own machine, and this
	// process (the hollow leaves and their simulations) per leaf.
	// Its cost per pod is per pod it holds (the delegates placed in it),
	// not per replica of the whole fleet.
	busiest := r.costs.Busiest(fieldNames)
	held, err := te.Cluster(busiest).Client.CoreV1().Pods("scale").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("busiest field during the deployment: %s, holding %d of the %d replicas", busiest, len(held.Items), f.Replicas)
	if r.allRunning > 0 && len(held.Items) > 0 {
		b.ReportMetric(float64(len(held.Items)), "tree-busiest-field-pods")
		b.ReportMetric(float64(r.costs[busiest].TotalCPU().Milliseconds())/float64(len(held.Items)), "tree-busiest-field-cpu-ms-per-pod")
		if !r.costs[busiest].RequestsUnread {
			b.ReportMetric(r.costs[busiest].Requests/float64(len(held.Items)), "tree-busiest-field-requests-per-pod")
		}
		b.ReportMetric(float64(self.Milliseconds())/r.allRunning.Seconds()/float64(f.leaves()), "tree-hollow-leaf-cpu-millicores")
	} else {
		// The target's row says why it has no figure (test/benchtable).
		b.Logf("NOT MEASURED tree-busiest-field-cpu-ms-per-pod: %d of %d replicas Running at the limit, %d in the busiest field", r.runningAtLimit, f.Replicas, len(held.Items))
	}
	if rss, err := framework.SelfRSSBytes(); err == nil {
		b.ReportMetric(float64(rss)/(1<<20)/float64(f.leaves()), "tree-hollow-leaf-rss-MiB")
	}
	fieldFigures(b, te, fieldNames)
	b.ReportMetric(load1(), "machine-load1-after-deploy")
	return r
}

// joinLeaves starts every hollow leaf at once and reports how long each
// took to be a Ready node of its field, and when the last one was.
func joinLeaves(b *testing.B, te *framework.TreeEnv, f fleet, logger *klog.Logger) ([]*hollow.Child, *stampSet) {
	ctx := b.Context()
	readyAt := &stampSet{at: map[string]time.Time{}}
	parents := make([]hollow.Parent, f.Fields)
	for i := range f.Fields {
		field := te.Cluster(f.fieldName(i))
		followNodes(ctx, b, field.Client, readyAt)
		p, err := hollow.ParentOf(ctx, field)
		if err != nil {
			b.Fatal(err)
		}
		parents[i] = p
	}
	children := make([]*hollow.Child, f.leaves())
	errs := make([]error, f.leaves())
	start := time.Now()
	var wg sync.WaitGroup
	for i := range f.leaves() {
		field, n := i%f.Fields, i/f.Fields
		name := f.leafName(field, n)
		wg.Go(func() {
			children[i], errs[i] = hollow.Start(ctx, hollow.Config{
				Name: name, Parent: parents[field], Nodes: f.NodesPerLeaf, NodeCapacity: nodeCapacity,
				Labels: map[string]string{corev1.LabelTopologyRegion: f.fieldName(field), corev1.LabelTopologyZone: name},
				// Changes are reported within a second whatever the
				// period; the period only refreshes an unchanged summary.
				// Every 10 s, 1,000 leaves (with their leases) kept this
				// machine so busy that leases lapsed.
				ReportFrequency: leafReportFrequency,
				Logger:          logger,
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			for _, c := range children[:i] {
				if c != nil {
					c.Stop()
				}
			}
			b.Fatal(err)
		}
	}
	joins := waitJoined(ctx, b, children, readyAt)
	b.ReportMetric(framework.Quantile(joins, 0.5), "tree-join-p50-ms")
	b.ReportMetric(framework.Quantile(joins, 0.99), "tree-join-p99-ms")
	b.ReportMetric(framework.Quantile(joins, 1), "tree-join-max-ms")
	var last time.Time
	for _, c := range children {
		if at, ok := readyAt.get(c.Name); ok && at.After(last) {
			last = at
		}
	}
	b.ReportMetric(float64(last.Sub(start).Milliseconds()), "tree-all-joined-ms")
	within := 0
	for _, d := range joins {
		if d <= time.Minute {
			within++
		}
	}
	b.ReportMetric(float64(within), "tree-joined-within-60s")
	b.ReportMetric(load1(), "machine-load1-after-joins")
	return children, readyAt
}

// summarySizes waits until every field's summary at the root covers its
// leaves and reports the largest summary annotation at each level.
func summarySizes(b *testing.B, te *framework.TreeEnv, f fleet) {
	ctx := b.Context()
	root := te.Cluster("root")
	var fieldMax int
	for i := range f.Fields {
		size, _ := waitSummary(ctx, b, root.Client, f.fieldName(i), f.LeavesPerField)
		fieldMax = max(fieldMax, size)
	}
	var leafMax int
	for i := range f.Fields {
		nodes, err := te.Cluster(f.fieldName(i)).Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range nodes.Items {
			leafMax = max(leafMax, len(n.Annotations["nestlet.io/summary"]))
		}
	}
	b.ReportMetric(float64(fieldMax), "tree-field-summary-max-bytes")
	b.ReportMetric(float64(leafMax), "tree-leaf-summary-max-bytes")
}

// fieldFigures reports the fields' API servers' RSS (largest) and every
// field's and the root's CPU and requests over the whole run, and the
// busiest field's.
func fieldFigures(b *testing.B, te *framework.TreeEnv, fieldNames []string) {
	var rss []float64
	for _, name := range fieldNames {
		if v, err := framework.RSSBytes(te.Cluster(name).Process("kube-apiserver")); err == nil {
			rss = append(rss, float64(v)/(1<<20))
		}
	}
	if len(rss) > 0 {
		b.ReportMetric(slices.Max(rss), "tree-field-apiserver-rss-max-MiB")
	}
}

// logPerPod logs, per pod of the deployment, what a cluster (or the
// fields together) spent: CPU by component and API requests by resource
// and verb (the frequent ones; none when its API server did not answer
// for them), to show where the tree's cost goes.
func logPerPod(b *testing.B, what string, cost framework.ClusterCost, pods int) {
	var cpu, reqs []string
	for _, k := range slices.Sorted(maps.Keys(cost.CPU)) {
		cpu = append(cpu, fmt.Sprintf("%s %.1f", k, float64(cost.CPU[k].Microseconds())/1000/float64(pods)))
	}
	for _, k := range slices.Sorted(maps.Keys(cost.ByKind)) {
		if per := cost.ByKind[k] / float64(pods); per >= 0.05 {
			reqs = append(reqs, fmt.Sprintf("%s %.2f", k, per))
		}
	}
	if cost.RequestsUnread {
		reqs = []string{"not read"}
	}
	b.Logf("during the deployment, per pod, %s: CPU ms %s; requests %s", what, strings.Join(cpu, ", "), strings.Join(reqs, ", "))
}

// requestsOf sums the requests of the named clusters by resource and verb
// (fromEach): nil when one did not answer.
func requestsOf(b *testing.B, te *framework.TreeEnv, names []string) map[string]float64 {
	read := fromEach(b.Context(), b, te, names, "requests", framework.Requests)
	if read == nil {
		return nil
	}
	out := map[string]float64{}
	for _, reqs := range read {
		for k, v := range reqs {
			out[k] += v
		}
	}
	return out
}

// fromEach reads something of every named cluster, all at once, each asked
// again every 5 s, two minutes in all (a field the fleet keeps busy may not
// answer at once): nil, logged, when one did not answer in time.
func fromEach[T any](ctx context.Context, b *testing.B, te *framework.TreeEnv, names []string, what string, read func(context.Context, *launcher.Cluster) (T, error)) []T {
	out := make([]T, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			errs[i] = wait.PollUntilContextTimeout(ctx, 5*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				var err error
				out[i], err = read(ctx, te.Cluster(name))
				return err == nil, nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Logf("%s of %s: not read within two minutes", what, names[i])
			return nil
		}
	}
	return out
}

// reportRenewals reports the leaves' lease renewals during the
// deployment (from before the Deployment was created until the API
// servers' counters were read after): per second, sent by the hollow
// leaves (this process) and taken by the fields' API servers, against one
// per leaf per renewal interval; and how long each waited for its answer.
// Few sent, answered quickly: this process did not send them in time.
// Sent but answered slowly: the fields. What the fields take includes
// their API servers' own identity Leases (kube-system, one renewal each
// every 10 s).
func reportRenewals(b *testing.B, te *framework.TreeEnv, r deployResult, fieldNames []string, leaves int, leaseSeconds0 *framework.Histogram) {
	b.Helper()
	if r.window <= 0 {
		return
	}
	// The same answers as the fields' API servers timed them, from
	// arrival (queueing included): a long answer here is the fields'; a
	// long one only in this process, its own.
	server := "not read"
	if now := fieldsLeaseSeconds(b.Context(), b, te, fieldNames); leaseSeconds0 != nil && now != nil {
		d := now.Sub(*leaseSeconds0)
		if d.Count > 0 {
			b.ReportMetric(d.Sum/d.Count*1000, "tree-lease-renewal-served-mean-ms")
			b.ReportMetric(d.Quantile(0.99)*1000, "tree-lease-renewal-served-p99-bucket-ms")
			server = fmt.Sprintf("mean %.0f ms, p99 at most %.0f ms", d.Sum/d.Count*1000, d.Quantile(0.99)*1000)
		}
	}
	sent := float64(len(r.renewed.latency)) / r.window.Seconds()
	b.ReportMetric(sent, "tree-lease-renewals-sent-per-s")
	received, read := 0.0, true
	for _, n := range fieldNames {
		read = read && !r.costs[n].RequestsUnread
		received += r.costs[n].ByKind["leases-PUT"]
	}
	taken := "not read"
	if read {
		b.ReportMetric(received/r.window.Seconds(), "tree-lease-renewals-taken-per-s")
		taken = fmt.Sprintf("%.1f/s", received/r.window.Seconds())
	}
	if len(r.renewed.latency) > 0 {
		b.ReportMetric(framework.Quantile(r.renewed.latency, 0.5), "tree-lease-renewal-answer-p50-ms")
		b.ReportMetric(framework.Quantile(r.renewed.latency, 0.99), "tree-lease-renewal-answer-p99-ms")
	}
	b.Logf("lease renewals during the deployment (%s): %d leaves sent %.1f/s, renewing every %s (%.1f/s), the fields took %s; answered in p50 %.0f ms, p99 %.0f ms here, served in the fields' API servers in %s",
		r.window.Round(time.Second), leaves, sent, leaseRenewInterval, float64(leaves)/leaseRenewInterval.Seconds(), taken,
		framework.Quantile(r.renewed.latency, 0.5), framework.Quantile(r.renewed.latency, 0.99), server)
}

// fieldsLeaseSeconds sums the fields' histograms of Lease updates
// (framework.RequestSeconds, fromEach), or nil when one did not answer in
// time (a field the deployment keeps busy).
func fieldsLeaseSeconds(ctx context.Context, b *testing.B, te *framework.TreeEnv, fieldNames []string) *framework.Histogram {
	b.Helper()
	read := fromEach(ctx, b, te, fieldNames, "the Lease update times", func(ctx context.Context, c *launcher.Cluster) (framework.Histogram, error) {
		return framework.RequestSeconds(ctx, c, "leases", "PUT")
	})
	if read == nil {
		return nil
	}
	var sum framework.Histogram
	for _, h := range read {
		sum = sum.Add(h)
	}
	return &sum
}
