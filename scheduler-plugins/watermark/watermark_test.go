package watermark

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	configv1 "github.com/nestlet/nestlet/scheduler-plugins/apis/config/v1"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/schedtest"
)

const regionKey = "topology.kubernetes.io/region"

// summaryTime is when the summaries of the tests were computed.
var summaryTime = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

var providerTaint = corev1.Taint{Key: api.TaintKeyProvider, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}

func newPlugin(t *testing.T, args *config.WatermarkArgs) *Watermark {
	t.Helper()
	var obj runtime.Object
	if args != nil {
		obj = args
	}
	p, err := New(context.Background(), obj, nil)
	require.NoError(t, err)
	return p.(*Watermark)
}

func nodeInfo(node *corev1.Node, pods ...*corev1.Pod) *framework.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni
}

// realNode has cpu CPUs, 64Gi of memory and room for pods pods.
func realNode(name, cpu, pods string) *corev1.Node {
	return st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{
		corev1.ResourceCPU: cpu, corev1.ResourceMemory: "64Gi", corev1.ResourcePods: pods,
	}).Obj()
}

// virtualNode stands for cluster child, with cpu CPUs allocatable in all
// and summary s (none if nil).
func virtualNode(t *testing.T, cpu string, s *api.Summary) *corev1.Node {
	t.Helper()
	w := st.MakeNode().Name("vn-child").Label(api.LabelCluster, "child").
		Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: "1Ti", corev1.ResourcePods: "1000"}).
		Taints([]corev1.Taint{providerTaint})
	if s != nil {
		raw, err := json.Marshal(s)
		require.NoError(t, err)
		w = w.Annotation(api.AnnotationSummary, string(raw))
	}
	return w.Obj()
}

// cpuPod requests cpu (and nothing else).
func cpuPod(name, cpu string) *st.PodWrapper {
	return st.MakePod().Name(name).Namespace("default").UID(name).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu})
}

// ownedBy makes a ReplicaSet with uid the pod's controller.
func ownedBy(w *st.PodWrapper, uid string) *st.PodWrapper {
	w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: types.UID(uid), Controller: ptr.To(true)}}
	return w
}

func filter(pl *Watermark, pod *corev1.Pod, ni *framework.NodeInfo) *fwk.Status {
	return pl.Filter(context.Background(), framework.NewCycleState(), pod, ni)
}

func TestNew(t *testing.T) {
	defaults := configv1.DefaultHighWatermark()
	tests := []struct {
		name    string
		args    runtime.Object
		want    config.WatermarkArgs
		wantErr string
	}{
		{name: "nil args", args: nil, want: config.WatermarkArgs{HighWatermark: defaults, Mode: Spread}},
		{name: "empty unknown", args: &runtime.Unknown{}, want: config.WatermarkArgs{HighWatermark: defaults, Mode: Spread}},
		{name: "unknown {}", args: &runtime.Unknown{Raw: []byte(`{}`), ContentType: runtime.ContentTypeJSON}, want: config.WatermarkArgs{HighWatermark: defaults, Mode: Spread}},
		{name: "unknown JSON", args: &runtime.Unknown{Raw: []byte(`{"mode":"pack","highWatermark":{"cpu":0.8,"nvidia.com/gpu":1}}`)},
			want: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.8, "nvidia.com/gpu": 1}, Mode: Pack}},
		{name: "unknown YAML", args: &runtime.Unknown{Raw: []byte("mode: pack\nhighWatermark:\n  memory: 0.5\n"), ContentType: runtime.ContentTypeYAML},
			want: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceMemory: 0.5}, Mode: Pack}},
		{name: "unknown, mode only", args: &runtime.Unknown{Raw: []byte(`{"mode":"pack"}`)}, want: config.WatermarkArgs{HighWatermark: defaults, Mode: Pack}},
		{name: "typed args", args: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourcePods: 0.5}},
			want: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourcePods: 0.5}, Mode: Spread}},
		{name: "typed empty args", args: &config.WatermarkArgs{}, want: config.WatermarkArgs{HighWatermark: defaults, Mode: Spread}},
		{name: "typed nil args", args: (*config.WatermarkArgs)(nil), want: config.WatermarkArgs{HighWatermark: defaults, Mode: Spread}},
		{name: "watermark 0", args: &runtime.Unknown{Raw: []byte(`{"highWatermark":{"cpu":0}}`)}, wantErr: "highWatermark[cpu] must be in (0, 1]"},
		{name: "watermark 1.5", args: &runtime.Unknown{Raw: []byte(`{"highWatermark":{"memory":1.5}}`)}, wantErr: "highWatermark[memory] must be in (0, 1], got 1.5"},
		{name: "typed watermark 1.5", args: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 1.5}}, wantErr: "must be in (0, 1]"},
		{name: "mode random", args: &runtime.Unknown{Raw: []byte(`{"mode":"random"}`)}, wantErr: `mode must be "spread" or "pack", got "random"`},
		{name: "typed mode random", args: &config.WatermarkArgs{Mode: "random"}, wantErr: "mode must be"},
		{name: "malformed JSON", args: &runtime.Unknown{Raw: []byte(`{"mode":`)}, wantErr: "Watermark args"},
		{name: "wrong type", args: &runtime.Unknown{Raw: []byte(`{"highWatermark":{"cpu":"high"}}`)}, wantErr: "Watermark args"},
		{name: "unsupported content type", args: &runtime.Unknown{Raw: []byte(`x`), ContentType: "application/x-protobuf"}, wantErr: "Watermark args"},
		{name: "foreign typed args", args: &corev1.Pod{}, wantErr: "Watermark args"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(context.Background(), tt.args, nil)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, p)
				return
			}
			require.NoError(t, err)
			require.Equal(t, Name, p.Name())
			pl := p.(*Watermark)
			require.Equal(t, tt.want, pl.args)
			require.IsType(t, clock.RealClock{}, pl.clock)
			require.Same(t, pl, pl.ScoreExtensions())
			if a, ok := tt.args.(*config.WatermarkArgs); ok && a != nil && a.HighWatermark != nil {
				pl.args.HighWatermark["x"] = 1
				require.NotContains(t, a.HighWatermark, corev1.ResourceName("x"), "the plugin must not share the caller's map")
			}
		})
	}
}

func TestFilterWatermark(t *testing.T) {
	tests := []struct {
		name        string
		args        *config.WatermarkArgs
		node        *corev1.Node
		existing    []*corev1.Pod
		pod         *corev1.Pod
		wantCode    fwk.Code
		wantMessage string
	}{
		{name: "cpu lifted to 96% of allocatable at watermark 0.95", node: realNode("n", "20", "110"),
			existing: []*corev1.Pod{cpuPod("a", "18").Obj()}, pod: cpuPod("p", "1200m").Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "n: cpu would reach 96 percent of its allocatable, above the high watermark of 95 percent"},
		{name: "cpu lifted to exactly 95%", node: realNode("n", "20", "110"),
			existing: []*corev1.Pod{cpuPod("a", "18").Obj()}, pod: cpuPod("p", "1").Obj()},
		{name: "empty node, pod over the watermark", node: realNode("n", "10", "110"), pod: cpuPod("p", "9600m").Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "cpu would reach 96 percent"},
		{name: "memory over the watermark", node: realNode("n", "64", "110"),
			pod:      st.MakePod().Name("p").Req(map[corev1.ResourceName]string{corev1.ResourceMemory: "62Gi"}).Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "memory would reach 97 percent"},
		{name: "custom watermark", args: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.5}},
			node: realNode("n", "10", "110"), pod: cpuPod("p", "6").Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "above the high watermark of 50 percent"},
		{name: "resource not watched", args: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceMemory: 0.5}},
			node: realNode("n", "10", "110"), existing: []*corev1.Pod{cpuPod("a", "9").Obj()}, pod: cpuPod("p", "1").Obj()},
		{name: "pods: room for one more", node: realNode("n", "10", "2"),
			existing: []*corev1.Pod{st.MakePod().Name("a").UID("a").Obj()}, pod: st.MakePod().Name("p").Obj()},
		{name: "pods: full, pods without requests count", node: realNode("n", "10", "2"),
			existing: []*corev1.Pod{st.MakePod().Name("a").UID("a").Obj(), st.MakePod().Name("b").UID("b").Obj()},
			pod:      st.MakePod().Name("p").Obj(), wantCode: fwk.Unschedulable, wantMessage: "pods would reach 150 percent of its allocatable, above the high watermark of 100 percent"},
		{name: "node without a requested resource", args: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{"nvidia.com/gpu": 1}},
			node: realNode("n", "10", "110"), pod: st.MakePod().Name("p").Req(map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "n: has no nvidia.com/gpu"},
		{name: "node without a resource not requested", args: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{"nvidia.com/gpu": 1}},
			node: realNode("n", "10", "110"), pod: cpuPod("p", "1").Obj()},
		{name: "extended resource over the watermark", args: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{"nvidia.com/gpu": 1}},
			node:     st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{"nvidia.com/gpu": "2"}).Obj(),
			existing: []*corev1.Pod{st.MakePod().Name("a").UID("a").Req(map[corev1.ResourceName]string{"nvidia.com/gpu": "2"}).Obj()},
			pod:      st.MakePod().Name("p").Req(map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "nvidia.com/gpu would reach 150 percent"},
		{name: "ephemeral storage over the watermark", args: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceEphemeralStorage: 0.9}},
			node:     st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceEphemeralStorage: "100Gi"}).Obj(),
			existing: []*corev1.Pod{st.MakePod().Name("a").UID("a").Req(map[corev1.ResourceName]string{corev1.ResourceEphemeralStorage: "80Gi"}).Obj()},
			pod:      st.MakePod().Name("p").Req(map[corev1.ResourceName]string{corev1.ResourceEphemeralStorage: "11Gi"}).Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "ephemeral-storage would reach 91 percent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, tt.args)
			got := filter(pl, tt.pod, nodeInfo(tt.node, tt.existing...))
			require.Equal(t, tt.wantCode, got.Code(), got.Message())
			require.Contains(t, got.Message(), tt.wantMessage)
			schedtest.RequireCleanFailure(t, tt.pod, got)
		})
	}
}

func TestFilterNoNode(t *testing.T) {
	pl := newPlugin(t, nil)
	got := pl.Filter(context.Background(), framework.NewCycleState(), cpuPod("p", "1").Obj(), framework.NewNodeInfo())
	require.Equal(t, fwk.Error, got.Code())
}

func TestFilterCooldown(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	until := now.Add(5 * time.Minute)
	s := &api.Summary{Cluster: "child", Time: summaryTime.Format(time.RFC3339), Groups: []api.Group{{
		Labels: map[string]string{regionKey: "east"}, Nodes: 1,
		Shapes: []corev1.ResourceList{shapeOf("8", "32Gi", "110")},
		Free:   shapeOf("8", "32Gi", "110"),
	}}}
	avoid := func(t *testing.T, m map[string]string) *corev1.Node {
		n := virtualNode(t, "64", s)
		raw, err := json.Marshal(m)
		require.NoError(t, err)
		n.Annotations[api.AnnotationAvoid] = string(raw)
		return n
	}
	tests := []struct {
		name        string
		node        *corev1.Node
		pod         *corev1.Pod
		now         time.Time
		wantCode    fwk.Code
		wantMessage string
	}{
		{name: "owner avoided until later", node: avoid(t, map[string]string{"rs-1": until.Format(time.RFC3339)}),
			pod: ownedBy(cpuPod("p", "1"), "rs-1").Obj(), now: now,
			wantCode: fwk.Unschedulable, wantMessage: "vn-child: asks to be avoided for this pod's owner until 2030-01-01T12:05:00Z"},
		{name: "owner avoided, cooldown over", node: avoid(t, map[string]string{"rs-1": until.Format(time.RFC3339)}),
			pod: ownedBy(cpuPod("p", "1"), "rs-1").Obj(), now: until.Add(time.Second)},
		{name: "owner avoided, cooldown ending now", node: avoid(t, map[string]string{"rs-1": until.Format(time.RFC3339)}),
			pod: ownedBy(cpuPod("p", "1"), "rs-1").Obj(), now: until},
		{name: "another owner avoided", node: avoid(t, map[string]string{"rs-2": until.Format(time.RFC3339)}),
			pod: ownedBy(cpuPod("p", "1"), "rs-1").Obj(), now: now},
		{name: "pod without owner", node: avoid(t, map[string]string{"rs-1": until.Format(time.RFC3339)}),
			pod: cpuPod("p", "1").Obj(), now: now},
		{name: "malformed avoid list", node: func() *corev1.Node {
			n := virtualNode(t, "64", s)
			n.Annotations[api.AnnotationAvoid] = "rs-1"
			return n
		}(), pod: ownedBy(cpuPod("p", "1"), "rs-1").Obj(), now: now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, nil)
			pl.clock = testingclock.NewFakePassiveClock(tt.now)
			got := filter(pl, tt.pod, nodeInfo(tt.node))
			require.Equal(t, tt.wantCode, got.Code(), got.Message())
			require.Contains(t, got.Message(), tt.wantMessage)
			schedtest.RequireCleanFailure(t, tt.pod, got)
		})
	}

	t.Run("the clock decides", func(t *testing.T) {
		pl := newPlugin(t, nil)
		clk := testingclock.NewFakeClock(now)
		pl.clock = clk
		ni := nodeInfo(avoid(t, map[string]string{"rs-1": until.Format(time.RFC3339)}))
		pod := ownedBy(cpuPod("p", "1"), "rs-1").Obj()
		require.Equal(t, fwk.Unschedulable, filter(pl, pod, ni).Code())
		clk.Step(4 * time.Minute)
		require.Equal(t, fwk.Unschedulable, filter(pl, pod, ni).Code())
		clk.Step(2 * time.Minute)
		require.True(t, filter(pl, pod, ni).IsSuccess())
	})
}

func TestFilterRealNodeHasNoShapeCheck(t *testing.T) {
	// Even carrying a summary, a node without the cluster label is judged by
	// the watermark alone.
	s := &api.Summary{Cluster: "x", Time: summaryTime.Format(time.RFC3339), Groups: []api.Group{{
		Nodes: 1, Shapes: []corev1.ResourceList{shapeOf("4", "16Gi", "110")},
	}}}
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	realN := realNode("real", "64", "110")
	realN.Annotations = map[string]string{api.AnnotationSummary: string(raw)}
	virt := realN.DeepCopy()
	virt.Labels = map[string]string{api.LabelCluster: "x"}

	tests := []struct {
		name     string
		node     *corev1.Node
		wantCode fwk.Code
	}{
		{name: "real node", node: realN},
		{name: "virtual node", node: virt, wantCode: fwk.Unschedulable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := filter(newPlugin(t, nil), cpuPod("p", "8").Obj(), nodeInfo(tt.node))
			require.Equal(t, tt.wantCode, got.Code(), got.Message())
		})
	}
}

// scoreNodes filters nodes as the framework would, then scores and
// normalises the feasible ones; it returns the normalised score by node.
func scoreNodes(t *testing.T, pl *Watermark, pod *corev1.Pod, nodes ...*framework.NodeInfo) map[string]int64 {
	t.Helper()
	ctx, state := context.Background(), framework.NewCycleState()
	var scores fwk.NodeScoreList
	for _, ni := range nodes {
		if !pl.Filter(ctx, state, pod, ni).IsSuccess() {
			continue
		}
		s, status := pl.Score(ctx, state, pod, ni)
		require.True(t, status.IsSuccess(), status.Message())
		scores = append(scores, fwk.NodeScore{Name: ni.Node().Name, Score: s})
	}
	require.True(t, pl.ScoreExtensions().NormalizeScore(ctx, state, pod, scores).IsSuccess())
	out := map[string]int64{}
	for _, s := range scores {
		require.GreaterOrEqual(t, s.Score, fwk.MinNodeScore)
		require.LessOrEqual(t, s.Score, fwk.MaxNodeScore)
		out[s.Name] = s.Score
	}
	return out
}

func TestScore(t *testing.T) {
	// emptier: 2 of 16 CPU requested; fuller: 10 of 16; over: 15 of 16, a
	// 1-CPU pod would lift it above the watermark.
	emptier := func() *framework.NodeInfo {
		return nodeInfo(realNode("emptier", "16", "110"), cpuPod("a", "2").Obj())
	}
	fuller := func() *framework.NodeInfo {
		return nodeInfo(realNode("fuller", "16", "110"), cpuPod("b", "10").Obj())
	}
	over := func() *framework.NodeInfo {
		return nodeInfo(realNode("over", "16", "110"), cpuPod("c", "15").Obj())
	}
	tests := []struct {
		name string
		mode Mode
		want map[string]int64
	}{
		{name: "spread prefers the emptier node", mode: Spread, want: map[string]int64{"emptier": 100, "fuller": 0}},
		{name: "pack prefers the fuller node below the watermark", mode: Pack, want: map[string]int64{"emptier": 0, "fuller": 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, &config.WatermarkArgs{Mode: tt.mode})
			got := scoreNodes(t, pl, cpuPod("p", "1").Obj(), emptier(), fuller(), over())
			require.Equal(t, tt.want, got)
		})
	}
}

func TestScoreRaw(t *testing.T) {
	node := realNode("n", "10", "10")
	tests := []struct {
		name     string
		args     *config.WatermarkArgs
		existing []*corev1.Pod
		pod      *corev1.Pod
		want     int64
	}{
		// cpu (1+3)/10, memory 0/64Gi, pods 2/10: (0.4+0+0.2)/3.
		{name: "pack: average projected level", args: &config.WatermarkArgs{Mode: Pack}, existing: []*corev1.Pod{cpuPod("a", "3").Obj()},
			pod: cpuPod("p", "1").Obj(), want: 200000},
		{name: "spread: complement", args: &config.WatermarkArgs{Mode: Spread}, existing: []*corev1.Pod{cpuPod("a", "3").Obj()},
			pod: cpuPod("p", "1").Obj(), want: 800000},
		{name: "pack: levels over 1 count as 1", args: &config.WatermarkArgs{Mode: Pack, HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 1}},
			existing: []*corev1.Pod{cpuPod("a", "12").Obj()}, pod: cpuPod("p", "1").Obj(), want: 1000000},
		{name: "no watched resource on the node", args: &config.WatermarkArgs{Mode: Spread, HighWatermark: map[corev1.ResourceName]float64{"nvidia.com/gpu": 1}},
			pod: cpuPod("p", "1").Obj(), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, tt.args)
			got, status := pl.Score(context.Background(), framework.NewCycleState(), tt.pod, nodeInfo(node, tt.existing...))
			require.True(t, status.IsSuccess())
			require.InDelta(t, tt.want, got, 1)
		})
	}
}

func TestNormalizeScore(t *testing.T) {
	tests := []struct {
		name   string
		scores []int64
		want   []int64
	}{
		{name: "none", scores: nil, want: nil},
		{name: "one", scores: []int64{123}, want: []int64{100}},
		{name: "all equal get the maximum", scores: []int64{500000, 500000, 500000}, want: []int64{100, 100, 100}},
		{name: "all zero get the maximum", scores: []int64{0, 0}, want: []int64{100, 100}},
		{name: "lowest to 0, highest to 100", scores: []int64{600000, 200000, 400000, 1000000}, want: []int64{50, 0, 25, 100}},
		{name: "one pod's difference is not rounded away", scores: []int64{999990, 999991}, want: []int64{0, 100}},
		{name: "full raw range", scores: []int64{0, 1000000, 500000}, want: []int64{0, 100, 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, nil)
			var list fwk.NodeScoreList
			for i, s := range tt.scores {
				list = append(list, fwk.NodeScore{Name: string(rune('a' + i)), Score: s})
			}
			require.True(t, pl.NormalizeScore(context.Background(), framework.NewCycleState(), nil, list).IsSuccess())
			var got []int64
			for i, s := range list {
				require.Equal(t, string(rune('a'+i)), s.Name)
				got = append(got, s.Score)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPodRequests(t *testing.T) {
	pod := st.MakePod().Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "500m", corev1.ResourceMemory: "1Gi"}).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "250m"}).Obj()
	got := podRequests(pod)
	require.Equal(t, int64(750), amount(corev1.ResourceCPU, got[corev1.ResourceCPU]))
	require.Equal(t, int64(1<<30), amount(corev1.ResourceMemory, got[corev1.ResourceMemory]))
	require.Equal(t, int64(1), amount(corev1.ResourcePods, got[corev1.ResourcePods]))
}
