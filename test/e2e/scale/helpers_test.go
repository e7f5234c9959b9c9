package scale

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
	"github.com/nestlet/nestlet/test/hollow"
)

// hollowLogger sends the hollow agents' logs, and klog's global output
// (client-go's), to a file: 1,000 agents would drown the benchmark's
// output, and go test prints this process's stderr in the middle of the
// benchmark's result line, which `make bench` parses. The file is kept,
// and named, if the benchmark fails. Afterwards klog writes nowhere: the
// clients of stopped clusters go on complaining (their certificates are
// gone) until the process ends.
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
	// Errors too: klog copies them to stderr unless told otherwise.
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := flags.Set(k, v); err != nil {
			b.Fatal(err)
		}
	}
	klog.SetOutput(f)
	b.Cleanup(func() {
		klog.Flush()
		klog.SetOutput(io.Discard)
		_ = f.Close()
		if b.Failed() {
			b.Logf("hollow agents' logs kept in %s", path)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(f), textlogger.Verbosity(2)))
}

// stampSet records the first time something was seen, and (for nodes)
// how many times one was seen to stop being Ready.
type stampSet struct {
	mu     sync.Mutex
	at     map[string]time.Time
	lapses int
}

func (s *stampSet) lapsed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lapses++
}

// lapseCount is how many Ready -> not Ready changes were seen so far.
func (s *stampSet) lapseCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lapses
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

// followNodes records when each node of a cluster is first seen Ready,
// and counts each time a node is seen to go from Ready to not Ready (a
// lease or heartbeat its parent saw lapse).
func followNodes(ctx context.Context, b *testing.B, client kubernetes.Interface, ready *stampSet) {
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	record := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && launcher.NodeReady(n) {
			ready.set(n.Name, time.Now())
		}
	}
	update := func(old, obj any) {
		if o, ok := old.(*corev1.Node); ok && launcher.NodeReady(o) {
			if n, ok := obj.(*corev1.Node); ok && !launcher.NodeReady(n) {
				ready.lapsed()
			}
		}
		record(obj)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: update}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("node informer did not sync")
	}
}

// joinLimit bounds the wait for every leaf to join: over three times the
// slowest whole join measured (170 s, docs/bench/2026-11-28-fleet.md), so
// a fleet that does not keep up fails in a bounded time and the rest of a
// full `make bench` still runs.
const joinLimit = 10 * time.Minute

// waitJoined waits until every leaf's node is Ready in its field (at most
// joinLimit) and returns each join's latency.
func waitJoined(ctx context.Context, b *testing.B, children []*hollow.Child, ready *stampSet) []time.Duration {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, joinLimit, true, func(context.Context) (bool, error) {
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
		b.Fatalf("%d of %d leaves not Ready in their field after %s: %s", len(missing), len(children), joinLimit, strings.Join(missing[:min(len(missing), 5)], "; "))
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

// sampleRSS samples the processes' RSS (and this process's, as "self")
// every second until ctx ends; the returned function gives the peaks.
func sampleRSS(ctx context.Context, procs map[string]*launcher.Process) func() map[string]int64 {
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

// The groups of processes whose run-queue waits the fleet reports.
const (
	groupHollow       = "this process (the hollow leaves)"
	groupFieldServers = "the fields' API servers"
	groupFieldOthers  = "the fields' other processes"
	groupRoot         = "the root"
)

// runQueues reads from the kernel's scheduler how long each group of the
// tree's processes has run and waited for a CPU so far: this process (the
// hollow leaves), the fields' API servers, the fields' other processes
// (controller managers, schedulers, agents), the root, and the rest by
// name (etcd).
func runQueues(te *framework.TreeEnv, fieldNames []string) map[string]framework.RunQueue {
	out := map[string]framework.RunQueue{}
	add := func(group string, pid int) {
		if q, err := framework.RunQueueOf(pid); err == nil {
			out[group] = out[group].Add(q)
		}
	}
	add(groupHollow, os.Getpid())
	group := func(cluster, component, name string) string {
		switch {
		case cluster == "root":
			return groupRoot
		case slices.Contains(fieldNames, cluster) && component == "kube-apiserver":
			return groupFieldServers
		case slices.Contains(fieldNames, cluster):
			return groupFieldOthers
		}
		return name
	}
	for _, c := range te.Clusters() {
		for _, p := range c.Processes() {
			add(group(c.Name, p.Name, p.Name), p.PID())
		}
	}
	for _, p := range te.Processes() {
		cluster, component, _ := launcher.ProcessComponent(p.Name)
		add(group(cluster, component, p.Name), p.PID())
	}
	return out
}

// reportRunQueues logs every group's run and wait between two readings of
// runQueues and reports, as seconds waited for a CPU per second run, this
// process's and the fields' API servers': which side of a slow answer was
// starved of the machine.
func reportRunQueues(b *testing.B, key, phase string, before, after map[string]framework.RunQueue) {
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(after)) {
		parts = append(parts, fmt.Sprintf("%s: %s", g, after[g].Sub(before[g])))
	}
	b.Logf("run queues %s: %s", phase, strings.Join(parts, "; "))
	b.ReportMetric(after[groupHollow].Sub(before[groupHollow]).WaitPerRun(), "tree-"+key+"-hollow-wait-per-cpu-s")
	b.ReportMetric(after[groupFieldServers].Sub(before[groupFieldServers]).WaitPerRun(), "tree-"+key+"-field-apiservers-wait-per-cpu-s")
}
