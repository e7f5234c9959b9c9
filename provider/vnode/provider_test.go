package vnode

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/version"
	"github.com/nestlet/nestlet/provider/summary"
)

var start = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// readyNode returns a Ready, schedulable node with cpu allocatable.
func readyNode(name, cpu string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Allocatable: rl("cpu", cpu, "memory", "1Gi", "pods", "10"),
			Capacity:    rl("cpu", cpu, "memory", "1Gi", "pods", "10"),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func validConfig() Config {
	return Config{
		ClusterName:     "child",
		ReportFrequency: 10 * time.Second,
		Nodes:           corelisters.NewNodeLister(newIndexer()),
		Pods:            corelisters.NewPodLister(newIndexer()),
		Ready:           func(context.Context) error { return nil },
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "no cluster name", mutate: func(c *Config) { c.ClusterName = "" }, wantErr: "ClusterName"},
		{name: "no node lister", mutate: func(c *Config) { c.Nodes = nil }, wantErr: "listers"},
		{name: "no pod lister", mutate: func(c *Config) { c.Pods = nil }, wantErr: "listers"},
		{name: "no ready func", mutate: func(c *Config) { c.Ready = nil }, wantErr: "Ready"},
		{name: "no report frequency", mutate: func(c *Config) { c.ReportFrequency = 0 }, wantErr: "ReportFrequency"},
		{name: "negative report frequency", mutate: func(c *Config) { c.ReportFrequency = -time.Second }, wantErr: "ReportFrequency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.mutate(&cfg)
			p, err := New(cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.Nil(t, p)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, time.Second, p.cfg.MinReportInterval, "default MinReportInterval")
			assert.Equal(t, api.DefaultGroupKeys, p.cfg.GroupKeys, "default GroupKeys")
			assert.NotNil(t, p.cfg.Clock, "default Clock")
		})
	}
}

func TestPing(t *testing.T) {
	boom := errors.New("readyz: not ok")
	tests := []struct {
		name    string
		ready   error
		wantErr error
	}{
		{name: "ready", ready: nil, wantErr: nil},
		{name: "not ready", ready: boom, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Ready = func(context.Context) error { return tt.ready }
			p, err := New(cfg)
			require.NoError(t, err)
			err = p.Ping(t.Context())
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
		})
	}
}

// The first good ping after failed ones has the node's status posted
// (a kick of the report loop) once PingRecoveredDelay has passed; good
// pings in a row and failed ones do not.
func TestPingRecoveredPostsStatus(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	var ready error
	cfg := validConfig()
	cfg.Clock = clock
	cfg.Ready = func(context.Context) error { return ready }
	p, err := New(cfg)
	require.NoError(t, err)
	kicked := func() bool {
		select {
		case <-p.kick:
			return true
		default:
			return false
		}
	}
	require.NoError(t, p.Ping(t.Context()))
	require.False(t, clock.HasWaiters(), "a good ping after good ones schedules nothing")
	ready = errors.New("readyz: not ok")
	require.Error(t, p.Ping(t.Context()))
	require.Error(t, p.Ping(t.Context()))
	require.False(t, clock.HasWaiters())
	ready = nil
	require.NoError(t, p.Ping(t.Context()))
	require.Eventually(t, clock.HasWaiters, 10*time.Second, time.Millisecond)
	require.False(t, kicked(), "not before the delay")
	clock.Step(PingRecoveredDelay)
	require.Eventually(t, kicked, 10*time.Second, time.Millisecond, "the status is posted after the delay")
	require.NoError(t, p.Ping(t.Context()))
	require.False(t, clock.HasWaiters(), "once only")
}

func TestNode(t *testing.T) {
	now := metav1.NewTime(start)
	conditions := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ChildClusterReady", Message: "the child cluster's API server is ready", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "ChildCluster", Message: "summarised by the child cluster", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "ChildCluster", Message: "summarised by the child cluster", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "ChildCluster", Message: "summarised by the child cluster", LastHeartbeatTime: now, LastTransitionTime: now},
	}
	provider := corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "nestlet", Effect: corev1.TaintEffectNoSchedule}
	dedicated := corev1.Taint{Key: "example.com/dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	sum := api.Summary{Cluster: "child", Covered: []string{"child"}, GroupKeys: []string{"kubernetes.io/arch"}, Groups: []api.Group{}, Time: start.Format(time.RFC3339)}
	sumJSON, err := json.Marshal(sum)
	require.NoError(t, err)

	tests := []struct {
		name   string
		labels map[string]string
		taints []corev1.Taint
		result summary.Result
		want   *corev1.Node
	}{
		{
			name: "summary labels, target labels and taints",
			labels: map[string]string{
				"example.com/team":            "a",
				"topology.kubernetes.io/zone": "from-target",
			},
			taints: []corev1.Taint{dedicated},
			result: summary.Result{
				Allocatable: rl("cpu", "4", "memory", "8Gi"),
				Labels: map[string]string{
					"kubernetes.io/arch":          "arm64",
					"beta.kubernetes.io/arch":     "amd64", // not what the stable label says: follows it
					"topology.kubernetes.io/zone": "from-summary",
					"tier":                        "gold",
				},
				Summary: sum,
			},
			want: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name: "child",
					Labels: map[string]string{
						"example.com/team":            "a",
						"tier":                        "gold",
						"topology.kubernetes.io/zone": "from-target",
						"kubernetes.io/arch":          "arm64",
						"kubernetes.io/os":            "linux",
						"beta.kubernetes.io/arch":     "arm64",
						"beta.kubernetes.io/os":       "linux",
						"kubernetes.io/hostname":      "child",
						"nestlet.io/cluster":          "child",
						"type":                        "virtual-kubelet",
					},
					Annotations: map[string]string{
						"nestlet.io/summary":        string(sumJSON),
						"nestlet.io/cluster-uid":    "uid-1",
						"nestlet.io/desired-taints": `[{"key":"example.com/dedicated","value":"gpu","effect":"NoSchedule"}]`,
						"nestlet.io/agent-version":  version.String(),
						"nestlet.io/protocols":      "1",
					},
				},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{provider, dedicated}},
				Status: corev1.NodeStatus{
					Capacity:    rl("cpu", "4", "memory", "8Gi"),
					Allocatable: rl("cpu", "4", "memory", "8Gi"),
					Phase:       corev1.NodeRunning,
					Conditions:  conditions,
					NodeInfo:    corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "arm64", KubeletVersion: "v1.35.4"},
				},
			},
		},
		{
			name:   "no target labels or taints",
			result: summary.Result{Allocatable: rl("cpu", "0"), Labels: map[string]string{}, Summary: sum},
			want: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name: "child",
					Labels: map[string]string{
						"kubernetes.io/arch":      "amd64",
						"kubernetes.io/os":        "linux",
						"beta.kubernetes.io/arch": "amd64",
						"beta.kubernetes.io/os":   "linux",
						"kubernetes.io/hostname":  "child",
						"nestlet.io/cluster":      "child",
						"type":                    "virtual-kubelet",
					},
					Annotations: map[string]string{
						"nestlet.io/summary":        string(sumJSON),
						"nestlet.io/cluster-uid":    "uid-1",
						"nestlet.io/desired-taints": "null",
						"nestlet.io/agent-version":  version.String(),
						"nestlet.io/protocols":      "1",
					},
				},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{provider}},
				Status: corev1.NodeStatus{
					Capacity:    rl("cpu", "0"),
					Allocatable: rl("cpu", "0"),
					Phase:       corev1.NodeRunning,
					Conditions:  conditions,
					NodeInfo:    corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: "v1.35.4"},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.ClusterUID = "uid-1"
			cfg.Labels = tt.labels
			cfg.Taints = tt.taints
			cfg.Clock = clocktesting.NewFakeClock(start)
			p, err := New(cfg)
			require.NoError(t, err)
			got, err := p.Node(tt.result)
			require.NoError(t, err)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Node() mismatch (-want +got):\n%s", d)
			}
			// The node's resource lists are copies: the caller may change them.
			got.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("99")
			got.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("98")
			assert.True(t, tt.result.Allocatable.Cpu().Equal(*tt.want.Status.Allocatable.Cpu()), "Node aliases the summary's allocatable")
			assert.False(t, got.Status.Capacity.Cpu().Equal(*got.Status.Allocatable.Cpu()), "capacity and allocatable alias each other")
		})
	}
}

// step is one action of a report scenario, and the reports it must give.
type step struct {
	// addNode is added to this cluster, annotate gets an annotation that
	// does not change the summary; signal sends a change event.
	addNode  *corev1.Node
	annotate string
	signal   bool
	// advance steps the fake clock.
	advance time.Duration
	// want are the times, as offsets from start, of the reports this step
	// must give, in order; wantCPU is the allocatable CPU of the last one.
	want    []time.Duration
	wantCPU string
}

// changeSignals returns signal, which sends a change event to the report
// loop, and barrier, which returns once every event sent so far has been
// handled (the loop takes the second send only after it handled the
// first). changed must be unbuffered.
func changeSignals(t *testing.T, changed chan<- struct{}) (signal, barrier func()) {
	signal = func() {
		select {
		case changed <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatal("the report loop does not take change events")
		}
	}
	return signal, func() { signal(); signal() }
}

func TestNotifyNodeStatus(t *testing.T) {
	const (
		freq        = 10 * time.Second
		minInterval = time.Second
	)
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "periodic report without change",
			steps: []step{
				{advance: freq / 2},
				{advance: freq / 2, want: []time.Duration{freq}, wantCPU: "2"},
				{advance: freq, want: []time.Duration{2 * freq}, wantCPU: "2"},
			},
		},
		{
			name: "a change is reported at once",
			steps: []step{
				{addNode: readyNode("n1", "3"), signal: true, want: []time.Duration{0}, wantCPU: "5"},
			},
		},
		{
			name: "a change event that does not change the summary is not reported",
			steps: []step{
				{advance: 2 * time.Second, annotate: "n0", signal: true},
				{signal: true},
				{advance: freq - 2*time.Second, want: []time.Duration{freq}, wantCPU: "2"},
			},
		},
		{
			name: "two changes within the interval: one report now, one when the interval has passed",
			steps: []step{
				{addNode: readyNode("n1", "3"), signal: true, want: []time.Duration{0}, wantCPU: "5"},
				{advance: 300 * time.Millisecond, addNode: readyNode("n2", "1"), signal: true},
				{signal: true},
				{advance: minInterval - 300*time.Millisecond - time.Millisecond},
				{advance: time.Millisecond, want: []time.Duration{minInterval}, wantCPU: "6"},
				{signal: true},
				// The rate limit holds again for the next change.
				{addNode: readyNode("n3", "1"), signal: true},
				{advance: minInterval, want: []time.Duration{2 * minInterval}, wantCPU: "7"},
			},
		},
		{
			name: "a change right after a periodic report waits for the interval",
			steps: []step{
				{advance: freq, want: []time.Duration{freq}, wantCPU: "2"},
				{addNode: readyNode("n1", "3"), signal: true},
				{advance: minInterval, want: []time.Duration{freq + minInterval}, wantCPU: "5"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(start)
			nodes := newIndexer()
			require.NoError(t, nodes.Add(readyNode("n0", "2")))
			changed := make(chan struct{}) // unbuffered: a send returns once the loop is back in its select
			reported := make(chan time.Time, 10)
			reports := make(chan *corev1.Node, 10)
			cfg := validConfig()
			cfg.Nodes = corelisters.NewNodeLister(nodes)
			cfg.ReportFrequency = freq
			cfg.MinReportInterval = minInterval
			cfg.Changed = changed
			cfg.Clock = clock
			cfg.Reported = func(at time.Time) { reported <- at }
			p, err := New(cfg)
			require.NoError(t, err)
			_, err = p.InitialNode()
			require.NoError(t, err)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			p.NotifyNodeStatus(ctx, func(n *corev1.Node) { reports <- n })

			signal, barrier := changeSignals(t, changed)
			barrier() // the loop runs and its ticker exists

			for i, s := range tt.steps {
				if s.addNode != nil {
					require.NoError(t, nodes.Add(s.addNode))
				}
				if s.annotate != "" {
					obj, ok, err := nodes.GetByKey(s.annotate)
					require.NoError(t, err)
					require.True(t, ok)
					n := obj.(*corev1.Node).DeepCopy()
					n.Annotations = map[string]string{"example.com/irrelevant": "x"}
					require.NoError(t, nodes.Update(n))
				}
				if s.advance > 0 {
					clock.Step(s.advance)
				}
				if s.signal {
					signal()
				}
				for _, off := range s.want {
					var n *corev1.Node
					select {
					case n = <-reports:
					case <-time.After(10 * time.Second):
						t.Fatalf("step %d: no report at %s", i, off)
					}
					select {
					case at := <-reported:
						assert.Equal(t, start.Add(off), at, "step %d: report time", i)
					case <-time.After(10 * time.Second):
						t.Fatalf("step %d: Reported not called", i)
					}
					assert.True(t, resource.MustParse(s.wantCPU).Equal(*n.Status.Allocatable.Cpu()), "step %d: allocatable cpu %s, want %s", i, n.Status.Allocatable.Cpu(), s.wantCPU)
				}
				barrier()
				select {
				case n := <-reports:
					t.Fatalf("step %d: unexpected report at %s (allocatable cpu %s)", i, clock.Now().Sub(start), n.Status.Allocatable.Cpu())
				default:
				}
			}
		})
	}
}

// With PatchSummary, the summary is written apart and never reaches the
// node controller or its last-applied record; periodic reports whose
// labels and capacity did not change are the summary patch alone.
func TestPatchSummary(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	nodes := newIndexer()
	require.NoError(t, nodes.Add(readyNode("n0", "2")))
	changed := make(chan struct{})
	patched := make(chan string, 10)
	reports := make(chan *corev1.Node, 10)
	var fail atomic.Bool
	cfg := validConfig()
	cfg.Nodes = corelisters.NewNodeLister(nodes)
	cfg.Changed = changed
	cfg.Clock = clock
	cfg.PatchSummary = func(_ context.Context, s string) error {
		patched <- s
		if fail.Load() {
			return errors.New("parent unreachable")
		}
		return nil
	}
	p, err := New(cfg)
	require.NoError(t, err)

	initial, err := p.InitialNode()
	require.NoError(t, err)
	require.Contains(t, initial.Annotations, api.AnnotationSummary, "registered with its summary")
	var applied metav1.ObjectMeta
	require.NoError(t, json.Unmarshal([]byte(initial.Annotations[vkLastAppliedObjectMeta]), &applied))
	assert.NotContains(t, applied.Annotations, api.AnnotationSummary, "not recorded as applied by the node controller")
	assert.Contains(t, applied.Annotations, api.AnnotationClusterUID)
	assert.NotContains(t, p.ControllerNode(initial).Annotations, api.AnnotationSummary)
	assert.Contains(t, initial.Annotations, api.AnnotationSummary, "ControllerNode copies")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p.NotifyNodeStatus(ctx, func(n *corev1.Node) { reports <- n })
	signal, barrier := changeSignals(t, changed)
	barrier()
	nextPatch := func() api.Summary {
		t.Helper()
		select {
		case s := <-patched:
			var out api.Summary
			require.NoError(t, json.Unmarshal([]byte(s), &out))
			return out
		case <-time.After(10 * time.Second):
			t.Fatal("no summary patch")
		}
		return api.Summary{}
	}
	noReport := func(what string) {
		t.Helper()
		barrier()
		select {
		case n := <-reports:
			t.Fatalf("%s: unexpected node controller update (cpu %s)", what, n.Status.Allocatable.Cpu())
		default:
		}
	}

	// A periodic report without change: the summary (with its new time)
	// only.
	clock.Step(cfg.ReportFrequency)
	s := nextPatch()
	assert.Equal(t, start.Add(cfg.ReportFrequency).UTC().Format(time.RFC3339), s.Time)
	noReport("periodic report")

	// A new node changes capacity (reported when the rate limit the
	// barrier above started has passed): the summary, then the node
	// controller gets the node without it.
	require.NoError(t, nodes.Add(readyNode("n1", "3")))
	clock.Step(2 * time.Second)
	nextPatch()
	select {
	case n := <-reports:
		assert.True(t, resource.MustParse("5").Equal(*n.Status.Allocatable.Cpu()))
		assert.NotContains(t, n.Annotations, api.AnnotationSummary)
		assert.Contains(t, n.Annotations, api.AnnotationClusterUID)
	case <-time.After(10 * time.Second):
		t.Fatal("no node controller update on a capacity change")
	}

	// A failed patch is retried at the next change event, though nothing
	// changed since.
	fail.Store(true)
	require.NoError(t, nodes.Add(readyNode("n2", "1")))
	signal() // within the rate limit: reported once it has passed
	clock.Step(2 * time.Second)
	nextPatch()
	<-reports
	fail.Store(false)
	signal()
	nextPatch()
	<-reports // p.last still holds the capacity before n2
	noReport("after the retry")
}

func TestAdoptPatch(t *testing.T) {
	cfg := validConfig()
	cfg.PatchSummary = func(context.Context, string) error { return nil }
	p, err := New(cfg)
	require.NoError(t, err)
	initial, err := p.InitialNode()
	require.NoError(t, err)

	oldMeta, err := json.Marshal(metav1.ObjectMeta{Name: "child", Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{api.AnnotationSummary: "{}", api.AnnotationClusterUID: "uid"}})
	require.NoError(t, err)
	for _, tt := range []struct {
		name        string
		existing    map[string]string
		wantApplied bool
	}{
		{"registered by an earlier version: the summary leaves the last-applied record", map[string]string{vkLastAppliedObjectMeta: string(oldMeta)}, true},
		{"registered by this version: the summary only", map[string]string{vkLastAppliedObjectMeta: initial.Annotations[vkLastAppliedObjectMeta]}, false},
		{"no record: the summary only", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Annotations: tt.existing}}
			raw, err := p.AdoptPatch(existing, initial)
			require.NoError(t, err)
			var patch struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(raw, &patch))
			assert.Equal(t, initial.Annotations[api.AnnotationSummary], patch.Metadata.Annotations[api.AnnotationSummary])
			applied, ok := patch.Metadata.Annotations[vkLastAppliedObjectMeta]
			require.Equal(t, tt.wantApplied, ok)
			if ok {
				var meta metav1.ObjectMeta
				require.NoError(t, json.Unmarshal([]byte(applied), &meta))
				assert.NotContains(t, meta.Annotations, api.AnnotationSummary)
				assert.Equal(t, "uid", meta.Annotations[api.AnnotationClusterUID], "the rest of the record is kept")
				assert.Equal(t, map[string]string{"a": "b"}, meta.Labels)
			}
		})
	}
}

// A child with nodes and none Ready cannot run pods: its virtual node is
// NotReady, so that the parent evicts one level up. A child without nodes
// yet (a mid cluster before its children join) stays Ready.
func TestNodeReadyFollowsChildNodes(t *testing.T) {
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		want        corev1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{name: "no node yet", want: corev1.ConditionTrue, wantReason: "ChildClusterReady"},
		{name: "one of two Ready", nodes: []*corev1.Node{readyNode("a", "1"), notReady(readyNode("b", "1"))}, want: corev1.ConditionTrue, wantReason: "ChildClusterReady"},
		{name: "cordoned but Ready", nodes: []*corev1.Node{cordoned(readyNode("a", "1"))}, want: corev1.ConditionTrue, wantReason: "ChildClusterReady"},
		{
			name: "none Ready", nodes: []*corev1.Node{notReady(readyNode("a", "1")), notReady(readyNode("b", "1"))},
			want: corev1.ConditionFalse, wantReason: ReasonNoReadyNode, wantMessage: "none of the child cluster's 2 nodes is Ready",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			nodes := newIndexer()
			for _, n := range tt.nodes {
				require.NoError(t, nodes.Add(n))
			}
			cfg.Nodes = corelisters.NewNodeLister(nodes)
			p, err := New(cfg)
			require.NoError(t, err)
			r, err := p.Compute()
			require.NoError(t, err)
			n, err := p.Node(r)
			require.NoError(t, err)
			ready := n.Status.Conditions[0]
			require.Equal(t, corev1.NodeReady, ready.Type)
			assert.Equal(t, tt.want, ready.Status)
			assert.Equal(t, tt.wantReason, ready.Reason)
			assert.Contains(t, ready.Message, tt.wantMessage)
		})
	}
}

func notReady(n *corev1.Node) *corev1.Node {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	return n
}

func cordoned(n *corev1.Node) *corev1.Node {
	n.Spec.Unschedulable = true
	return n
}

// The summary and the pod CIDRs reported carry of a child's node what the
// parent's side grants it (Config.ChildPodCIDRs), not its claim.
func TestChildPodCIDRsReported(t *testing.T) {
	nodes := newIndexer()
	own := readyNode("own", "1")
	own.Spec.PodCIDRs = []string{"10.128.0.0/24"}
	kid := readyNode("kid", "1")
	raw, err := api.FormatSummary(api.Summary{Cluster: "kid", Covered: []string{"kid"}, PodCIDRs: []string{"0.0.0.0/1"}})
	require.NoError(t, err)
	kid.Annotations = map[string]string{api.AnnotationSummary: raw}
	require.NoError(t, nodes.Add(own))
	require.NoError(t, nodes.Add(kid))
	cfg := validConfig()
	cfg.Nodes = corelisters.NewNodeLister(nodes)
	cfg.ChildPodCIDRs = func(n *corev1.Node) ([]string, bool) {
		if n.Name == "kid" {
			return []string{"10.128.5.0/24"}, true
		}
		return nil, false
	}
	p, err := New(cfg)
	require.NoError(t, err)
	r, err := p.Compute()
	require.NoError(t, err)
	require.Equal(t, []string{"10.128.0.0/24", "10.128.5.0/24"}, r.Summary.PodCIDRs)
	cidrs, err := p.PodCIDRs()
	require.NoError(t, err)
	require.Equal(t, r.Summary.PodCIDRs, cidrs)
}
