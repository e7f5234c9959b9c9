package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/localcluster"
	"github.com/nestlet/nestlet/test/framework"
	"github.com/nestlet/nestlet/test/hollow"
)

// The topology's size: change these to fit a smaller machine.
const (
	// HollowChildren is the number of hollow leaves, split evenly over the
	// two field clusters.
	HollowChildren = 120
	// NodesPerChild is each leaf's number of (simulated) nodes.
	NodesPerChild = 2
	// Replicas of the Deployment created at the root.
	Replicas = 1000
)

var fieldNames = []string{"field-a", "field-b"}

// BenchmarkHollow120 measures the paper's topology.
//
// Joins: the 120 hollow leaves join the two fields all at once (60 each,
// one bootstrap token per field). hollow-join: Target created in the leaf
// -> its virtual node Ready in the field, seen by an informer on the
// field's nodes; split into discovery (-> CSR created), approval (-> node
// certificate issued and stored) and register (-> node Ready).
//
// Summaries: <field>-summary-bytes is the size of the nestlet.io/summary
// annotation of each field's virtual node in the root once it covers its
// 60 leaves; <field>-node-bytes the whole node object.
//
// Deployment: 1,000 replicas created at the root, no nodeSelector.
// deploy1000-all-running-ms: create -> the last pod seen Running at the
// root. root-sched: each pod seen created -> seen bound at the root (one
// informer's timestamps); root-e2e: created -> Running. Then level by
// level, by the same pods' delegates: hop-root-field (bound at the root ->
// delegate in the field), field-sched, hop-field-leaf (bound in the field
// -> delegate in the leaf), up-leaf-field and up-field-root (Running below
// -> Running above). CPU of every process over the phase, in millicores
// (<cluster>-<program>, and all of them with this one), peak RSS of the
// fields' API servers and agents, and this process's CPU and peak RSS
// divided by 120 as one hollow agent's (the 120 agents share this process
// with their simulations and the benchmark: an average, simulation
// included).
//
// Figures only, no timed assertion. The scenario runs once whatever b.N;
// every leaf is stopped when it ends, the clusters by TestMain.
func BenchmarkHollow120(b *testing.B) {
	if env == nil {
		b.Skip("the clusters were not started (TestMain starts them when this benchmark is selected)")
	}
	ctx := b.Context()
	root := env.Cluster("root")
	fields := []*localcluster.Cluster{env.Cluster(fieldNames[0]), env.Cluster(fieldNames[1])}
	logger := hollowLogger(b)

	// Watch every field's nodes first: a leaf's node is Ready when it is
	// registered.
	readyAt := &stampSet{at: map[string]time.Time{}}
	for _, f := range fields {
		followNodes(ctx, b, f.Client, readyAt)
	}

	parents := make([]hollow.Parent, len(fields))
	for i, f := range fields {
		p, err := hollow.ParentOf(ctx, f)
		if err != nil {
			b.Fatal(err)
		}
		parents[i] = p
	}

	// All leaves at once.
	children := make([]*hollow.Child, HollowChildren)
	b.Cleanup(func() {
		var wg sync.WaitGroup
		for _, c := range children {
			if c != nil {
				wg.Go(c.Stop)
			}
		}
		wg.Wait()
	})
	errs := make([]error, HollowChildren)
	var wg sync.WaitGroup
	for i := range HollowChildren {
		field := i % len(fields)
		name := leafName(field, i/len(fields))
		wg.Go(func() {
			children[i], errs[i] = hollow.Start(ctx, hollow.Config{
				Name:   name,
				Parent: parents[field],
				Nodes:  NodesPerChild,
				NodeCapacity: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110"),
				},
				Labels: map[string]string{
					corev1.LabelTopologyRegion: fieldNames[field],
					corev1.LabelTopologyZone:   name,
				},
				Logger: &logger,
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}

	joins := waitJoined(ctx, b, children, readyAt)
	b.ReportMetric(framework.Quantile(joins, 0.5), "hollow-join-p50-ms")
	b.ReportMetric(framework.Quantile(joins, 0.99), "hollow-join-p99-ms")
	b.ReportMetric(framework.Quantile(joins, 1), "hollow-join-max-ms")
	// Of which: Target created -> CSR created in the field (token
	// discovery), -> certificate issued and stored (approval and signing
	// by the field's controller manager), -> virtual node registered.
	var discovery, approval, register []time.Duration
	for _, c := range children {
		csr, ok1 := c.FirstReason(v1alpha1.ConditionJoined, v1alpha1.ReasonAwaitingApproval)
		joined, ok2 := c.FirstTrue(v1alpha1.ConditionJoined)
		ready, ok3 := readyAt.get(c.Name)
		if ok1 && ok2 && ok3 {
			discovery = append(discovery, csr.Sub(c.Created))
			approval = append(approval, joined.Sub(csr))
			register = append(register, ready.Sub(joined))
		}
	}
	report(b, "hollow-join-discovery", discovery)
	report(b, "hollow-join-approval", approval)
	report(b, "hollow-join-register", register)
	b.ReportMetric(load1(), "machine-load1-after-joins")

	// The fields' summaries at the root, once they cover every leaf.
	for i, name := range fieldNames {
		size, nodeSize := waitSummary(ctx, b, root.Client, name, HollowChildren/len(fields)+boolInt(i < HollowChildren%len(fields)))
		b.ReportMetric(float64(size), name+"-summary-bytes")
		b.ReportMetric(float64(nodeSize), name+"-node-bytes")
	}

	deploy(ctx, b, root, fields, children)
	b.ReportMetric(0, "ns/op")
}

func leafName(field, i int) string {
	return fmt.Sprintf("leaf-%s-%03d", strings.TrimPrefix(fieldNames[field], "field-"), i)
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// hollowLogger sends the hollow agents' logs, and klog's global output
// (client-go's), to a file: 120 agents would drown the benchmark's output.
// The file is kept, and named, if the benchmark fails.
func hollowLogger(b *testing.B) klog.Logger {
	dir, err := os.MkdirTemp("", "nestlet-hollow-")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "hollow.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	klog.LogToStderr(false)
	klog.SetOutput(f)
	b.Cleanup(func() {
		klog.Flush()
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
		_ = f.Close()
		if b.Failed() {
			b.Logf("hollow agents' logs kept in %s", path)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(f), textlogger.Verbosity(2)))
}

// stampSet records the first time something was seen.
type stampSet struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *stampSet) set(key string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[key]; !ok {
		s.at[key] = t
	}
}

func (s *stampSet) get(key string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[key]
	return t, ok
}

// followNodes records when each node of a cluster is first seen Ready.
func followNodes(ctx context.Context, b *testing.B, client kubernetes.Interface, ready *stampSet) {
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	record := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && localcluster.NodeReady(n) {
			ready.set(n.Name, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("node informer did not sync")
	}
}

// waitJoined waits until every leaf's node is Ready in its field and
// returns each join's latency.
func waitJoined(ctx context.Context, b *testing.B, children []*hollow.Child, ready *stampSet) []time.Duration {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		for _, c := range children {
			if _, ok := ready.get(c.Name); !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var missing []string
		for _, c := range children {
			if _, ok := ready.get(c.Name); ok {
				continue
			}
			msg := c.Name
			if t, gerr := c.Targets.Get(context.WithoutCancel(ctx), c.Target, metav1.GetOptions{}); gerr == nil {
				if cond := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady); cond != nil {
					msg += fmt.Sprintf(" (%s: %s)", cond.Reason, cond.Message)
				}
			}
			missing = append(missing, msg)
		}
		b.Fatalf("%d of %d leaves not Ready in their field after 5m: %s", len(missing), len(children), strings.Join(missing[:min(len(missing), 5)], "; "))
	}
	out := make([]time.Duration, 0, len(children))
	for _, c := range children {
		at, _ := ready.get(c.Name)
		out = append(out, at.Sub(c.Created))
	}
	return out
}

// waitSummary waits until the field's virtual node in the root summarises
// all its leaves, and returns the size of its summary annotation and of
// the whole node object (JSON).
func waitSummary(ctx context.Context, b *testing.B, rootClient kubernetes.Interface, field string, leaves int) (summaryBytes, nodeBytes int) {
	var covered int
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := rootClient.CoreV1().Nodes().Get(ctx, field, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		raw := n.Annotations[api.AnnotationSummary]
		var s api.Summary
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		covered = max(s.Clusters, len(s.Covered))
		if covered < leaves+1 {
			return false, nil
		}
		data, err := json.Marshal(n)
		if err != nil {
			return false, err
		}
		summaryBytes, nodeBytes = len(raw), len(data)
		return true, nil
	})
	if err != nil {
		b.Fatalf("%s's summary at the root covers %d clusters, want %d: %v", field, covered, leaves+1, err)
	}
	return summaryBytes, nodeBytes
}

// deploy creates the Deployment at the root and reports its figures.
func deploy(ctx context.Context, b *testing.B, root *localcluster.Cluster, fields []*localcluster.Cluster, children []*hollow.Child) {
	const ns = "scale"
	if err := root.EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each level's pods: the root's, the fields' delegates, the leaves'.
	// Delegates are keyed by the root pod's name (framework.PodTimes).
	stamps, fieldStamps, leafStamps := framework.NewPodTimes(), framework.NewPodTimes(), framework.NewPodTimes()
	stamps.Follow(fctx, b, root.Client, ns)
	for _, f := range fields {
		fieldStamps.Follow(fctx, b, f.Client, ns)
	}
	for _, c := range children {
		leafStamps.Follow(fctx, b, c.Client, ns)
	}

	// CPU over the deployment phase of every process of the environment
	// (by cluster and program), RSS of the fields' API servers and agents.
	watched := map[string]*localcluster.Process{}
	for _, p := range env.Processes() {
		watched[processKey(p)] = p
	}
	cpu0 := map[string]time.Duration{}
	for k, p := range watched {
		if t, err := framework.CPUTime(p); err == nil {
			cpu0[k] = t
		}
	}
	self0 := selfCPU()
	rssOf := map[string]*localcluster.Process{}
	for _, f := range fields {
		rssOf[f.Name+"-apiserver"] = processNamed(b, f.Processes(), "kube-apiserver")
		rssOf[f.Name+"-agent"] = processNamed(b, env.Processes(), f.Name+"-nestlet")
	}
	peaks := sampleRSS(fctx, rssOf)

	labels := map[string]string{"app": "scale"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				// No nodeSelector: the root's scheduler spreads over both
				// fields, theirs over their leaves.
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}},
			},
		},
	}
	costs0, err := framework.MeasureCosts(ctx, env.Environment)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := root.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Minute, true, func(context.Context) (bool, error) {
		return stamps.CountRunning() >= Replicas, nil
	})
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("%d of %d pods Running at the root after 15m", stamps.CountRunning(), Replicas)
	}
	// Per real cluster, as if each had its own machine (the hollow
	// leaves run in this process: see hollow-agent-* below).
	if costs1, err := framework.MeasureCosts(ctx, env.Environment); err == nil {
		costs1.Sub(costs0).Report(b, "deploy", append([]string{"root"}, fieldNames...), Replicas)
	}
	cpu1 := map[string]time.Duration{}
	for k, p := range watched {
		if t, err := framework.CPUTime(p); err == nil {
			cpu1[k] = t
		}
	}
	self1 := selfCPU()
	b.ReportMetric(load1(), "machine-load1-after-deploy")
	cancel()
	rss := peaks()

	for _, pt := range []*framework.PodTimes{stamps, fieldStamps, leafStamps} {
		pt.Lock()
	}
	var lastRunning time.Time
	for _, t := range stamps.Running {
		if t.After(lastRunning) {
			lastRunning = t
		}
	}
	b.ReportMetric(float64(lastRunning.Sub(start).Milliseconds()), "deploy1000-all-running-ms")
	report(b, "root-sched", framework.Diffs(stamps.Added, stamps.Bound))
	report(b, "root-e2e", framework.Diffs(stamps.Added, stamps.Running))
	// Where the time goes, level by level: forwarded root -> field, the
	// field's scheduling, forwarded field -> leaf, and the status back up.
	report(b, "hop-root-field", framework.Diffs(stamps.Bound, fieldStamps.Added))
	report(b, "field-sched", framework.Diffs(fieldStamps.Added, fieldStamps.Bound))
	report(b, "hop-field-leaf", framework.Diffs(fieldStamps.Bound, leafStamps.Added))
	report(b, "up-leaf-field", framework.Diffs(leafStamps.Running, fieldStamps.Running))
	report(b, "up-field-root", framework.Diffs(fieldStamps.Running, stamps.Running))
	for _, pt := range []*framework.PodTimes{stamps, fieldStamps, leafStamps} {
		pt.Unlock()
	}
	// Pods the schedulers found no room for at first (retried later).
	b.ReportMetric(float64(failedScheduling(ctx, b, root, ns)), "root-failed-scheduling")
	b.ReportMetric(float64(failedScheduling(ctx, b, fields[0], ns)+failedScheduling(ctx, b, fields[1], ns)), "fields-failed-scheduling")

	var total time.Duration
	for k := range watched {
		d := cpu1[k] - cpu0[k]
		total += d
		b.ReportMetric(float64(d.Milliseconds())/wall.Seconds(), k+"-cpu-millicores")
	}
	total += self1 - self0
	b.ReportMetric(float64(total.Milliseconds())/wall.Seconds(), "all-processes-cpu-millicores")
	for k := range rssOf {
		b.ReportMetric(float64(rss[k])/(1<<20), k+"-rss-MiB")
	}
	// The 120 hollow agents share this process with their simulated
	// clusters and the benchmark itself: per-agent figures are that
	// process's totals divided by the number of leaves, simulation
	// included.
	b.ReportMetric(float64((self1-self0).Milliseconds())/wall.Seconds()/HollowChildren, "hollow-agent-cpu-millicores")
	b.ReportMetric(float64(rss["self"])/(1<<20)/HollowChildren, "hollow-agent-rss-MiB")

	// How the pods spread over the leaves (delegates in each simulation).
	perLeaf := make([]int, 0, len(children))
	for _, c := range children {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		perLeaf = append(perLeaf, len(list.Items))
	}
	b.ReportMetric(float64(slices.Min(perLeaf)), "pods-per-leaf-min")
	b.ReportMetric(float64(slices.Max(perLeaf)), "pods-per-leaf-max")
}

// failedScheduling counts the FailedScheduling events in ns (repeats
// included).
func failedScheduling(ctx context.Context, b *testing.B, c *localcluster.Cluster, ns string) int {
	evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, ev := range evs.Items {
		count := max(int(ev.Count), 1)
		if ev.Series != nil {
			count = max(count, int(ev.Series.Count))
		}
		n += count
	}
	return n
}

// processKey names a process of the environment for the figures:
// <cluster>-<program> (root-apiserver, field-a-agent, ...), etcd.
func processKey(p *localcluster.Process) string {
	for _, c := range env.Clusters() {
		if p.Name == c.Name+"-nestlet" {
			return c.Name + "-agent"
		}
		for _, own := range c.Processes() {
			if own == p {
				return c.Name + "-" + strings.TrimPrefix(p.Name, "kube-")
			}
		}
	}
	return p.Name
}

func processNamed(b *testing.B, procs []*localcluster.Process, name string) *localcluster.Process {
	for _, p := range procs {
		if p.Name == name {
			return p
		}
	}
	b.Fatalf("no process %s", name)
	return nil
}

// sampleRSS samples the processes' RSS (and this process's, as "self")
// every second until ctx ends; the returned function gives the peaks.
func sampleRSS(ctx context.Context, procs map[string]*localcluster.Process) func() map[string]int64 {
	var mu sync.Mutex
	peak := map[string]int64{}
	sample := func() {
		mu.Lock()
		defer mu.Unlock()
		for k, p := range procs {
			if v, err := framework.RSSBytes(p); err == nil && v > peak[k] {
				peak[k] = v
			}
		}
		if v, err := framework.SelfRSSBytes(); err == nil && v > peak["self"] {
			peak["self"] = v
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			sample()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() map[string]int64 {
		<-done
		sample()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// load1 is the machine's load average over the last minute (every
// process, this benchmark's and others').
func load1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// selfCPU is this process's user plus system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report reports the p50 and p99 of ds in milliseconds.
func report(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(framework.Quantile(ds, 0.5), name+"-p50-ms")
	b.ReportMetric(framework.Quantile(ds, 0.99), name+"-p99-ms")
}
