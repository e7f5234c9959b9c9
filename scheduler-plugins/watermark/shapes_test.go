package watermark

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/schedtest"
)

func shapeOf(cpu, mem, pods string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for r, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: pods} {
		if v != "" {
			out[r] = resource.MustParse(v)
		}
	}
	return out
}

func shapes(cpus ...string) []corev1.ResourceList {
	var out []corev1.ResourceList
	for _, c := range cpus {
		out = append(out, shapeOf(c, "32Gi", "110"))
	}
	return out
}

func regionGroup(region string, shapes []corev1.ResourceList, taints ...corev1.Taint) api.Group {
	g := api.Group{Nodes: len(shapes), Shapes: shapes, Taints: taints,
		Allocatable: corev1.ResourceList{}, Free: corev1.ResourceList{}}
	if region != "" {
		g.Labels = map[string]string{regionKey: region}
	}
	for _, sh := range shapes {
		for r, q := range sh {
			sum := g.Free[r]
			sum.Add(q)
			g.Free[r] = sum
			g.Allocatable[r] = sum.DeepCopy()
		}
	}
	return g
}

func summaryOf(groups ...api.Group) *api.Summary {
	return &api.Summary{Cluster: "child", Covered: []string{"child"}, GroupKeys: api.DefaultGroupKeys,
		Groups: groups, Time: summaryTime.Format(time.RFC3339)}
}

// Pods already on the virtual node, by when they were bound.
func boundAt(name, cpu string, at time.Time) *corev1.Pod {
	return cpuPod(name, cpu).Conditions([]corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(time.Hour))},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)},
	}).Obj()
}

func after(name, cpu string) *corev1.Pod  { return boundAt(name, cpu, summaryTime.Add(time.Minute)) }
func before(name, cpu string) *corev1.Pod { return boundAt(name, cpu, summaryTime.Add(-time.Minute)) }
func assumed(name, cpu string) *corev1.Pod {
	return cpuPod(name, cpu).Obj()
}

func inEast(w *st.PodWrapper) *corev1.Pod {
	return w.NodeSelector(map[string]string{regionKey: "east"}).Obj()
}

func TestFilterShapes(t *testing.T) {
	dedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	// east: 64 CPU free in all, on 16 nodes of 4 free each (the summary
	// keeps the 4 largest shapes); west: one node with 16 free.
	fragmented := summaryOf(
		func() api.Group {
			g := regionGroup("east", shapes("4", "4", "4", "4"))
			g.Nodes = 16
			g.Free[corev1.ResourceCPU] = resource.MustParse("64")
			g.Allocatable[corev1.ResourceCPU] = resource.MustParse("128")
			return g
		}(),
		regionGroup("west", shapes("16")),
	)
	one8 := summaryOf(regionGroup("east", shapes("8")))
	noTime := summaryOf(regionGroup("east", shapes("8")))
	noTime.Time = ""
	longAgo := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

	tests := []struct {
		name        string
		summary     *api.Summary
		pods        []*corev1.Pod
		pod         *corev1.Pod
		wantCode    fwk.Code
		wantMessage string
	}{
		// Fragmentation.
		{name: "fragmented: 8 CPU pod", summary: fragmented, pod: inEast(cpuPod("p", "8")),
			wantCode: fwk.Unschedulable, wantMessage: "vn-child: largest free shape 4 CPU < 8 CPU"},
		{name: "fragmented: 4 CPU pod", summary: fragmented, pod: inEast(cpuPod("p", "4"))},
		{name: "over the watermark and larger than any node: both said", summary: fragmented, pod: cpuPod("p", "250").Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "vn-child: cpu would reach 98 percent of its allocatable, above the high watermark of 95 percent; largest free shape 16 CPU < 250 CPU"},
		{name: "fragmented: 8 CPU pod for any region fits west", summary: fragmented, pod: cpuPod("p", "8").Obj()},
		{name: "fragmented: 17 CPU pod for any region", summary: fragmented, pod: cpuPod("p", "17").Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "largest free shape 16 CPU < 17 CPU"},
		{name: "shapes of every matching group", summary: summaryOf(
			func() api.Group { g := regionGroup("east", shapes("4")); g.Labels["zone"] = "a"; return g }(),
			func() api.Group { g := regionGroup("east", shapes("6")); g.Labels["zone"] = "b"; return g }(),
			regionGroup("west", shapes("32")),
		), pod: inEast(cpuPod("p", "6"))},
		{name: "largest shape of the matching groups", summary: summaryOf(
			func() api.Group { g := regionGroup("east", shapes("4")); g.Labels["zone"] = "a"; return g }(),
			func() api.Group { g := regionGroup("east", shapes("6")); g.Labels["zone"] = "b"; return g }(),
			regionGroup("west", shapes("32")),
		), pod: inEast(cpuPod("p", "7")), wantCode: fwk.Unschedulable, wantMessage: "largest free shape 6 CPU < 7 CPU"},
		{name: "untolerated group left out", summary: summaryOf(regionGroup("east", shapes("16"), dedicated), regionGroup("east", shapes("4"))),
			pod: inEast(cpuPod("p", "8")), wantCode: fwk.Unschedulable, wantMessage: "largest free shape 4 CPU < 8 CPU"},
		{name: "tolerated group counted", summary: summaryOf(regionGroup("east", shapes("16"), dedicated), regionGroup("east", shapes("4"))),
			pod: inEast(cpuPod("p", "8").Toleration("dedicated"))},
		{name: "memory shortfall", summary: summaryOf(regionGroup("east", []corev1.ResourceList{shapeOf("8", "4Gi", "110")})),
			pod:      inEast(st.MakePod().Name("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "8Gi"})),
			wantCode: fwk.Unschedulable, wantMessage: "largest free shape 4Gi memory < 8Gi memory"},
		{name: "resource the shapes lack", summary: one8,
			pod:      inEast(st.MakePod().Name("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", "nvidia.com/gpu": "1"})),
			wantCode: fwk.Unschedulable, wantMessage: "largest free shape 0 nvidia.com/gpu < 1 nvidia.com/gpu"},
		{name: "matching group without shapes", summary: summaryOf(regionGroup("east", nil), regionGroup("west", shapes("16"))),
			pod: inEast(cpuPod("p", "1")), wantCode: fwk.Unschedulable, wantMessage: "vn-child: no free node in the groups matching region=east"},
		{name: "no matching group: left to SummaryAffinity", summary: one8,
			pod: cpuPod("p", "1").NodeSelector(map[string]string{regionKey: "north"}).Obj()},
		{name: "no summary: left to SummaryAffinity", summary: nil, pod: inEast(cpuPod("p", "100"))},

		// Pods bound since the summary.
		{name: "two 3 CPU pods bound after the summary: 3 CPU pod", summary: one8,
			pods: []*corev1.Pod{after("a", "3"), after("b", "3")}, pod: inEast(cpuPod("p", "3")),
			wantCode: fwk.Unschedulable, wantMessage: "less 2 pods bound since the last report, is 2 CPU < 3 CPU"},
		{name: "two 3 CPU pods bound after the summary: 2 CPU pod", summary: one8,
			pods: []*corev1.Pod{after("a", "3"), after("b", "3")}, pod: inEast(cpuPod("p", "2"))},
		{name: "two 3 CPU pods bound before the summary: 3 CPU pod", summary: one8,
			pods: []*corev1.Pod{before("a", "3"), before("b", "3")}, pod: inEast(cpuPod("p", "3"))},
		{name: "two 3 CPU pods bound before the summary: 8 CPU pod", summary: one8,
			pods: []*corev1.Pod{before("a", "3"), before("b", "3")}, pod: inEast(cpuPod("p", "8"))},
		{name: "two 3 CPU pods only assumed", summary: one8,
			pods: []*corev1.Pod{assumed("a", "3"), assumed("b", "3")}, pod: inEast(cpuPod("p", "3")),
			wantCode: fwk.Unschedulable, wantMessage: "is 2 CPU < 3 CPU"},
		{name: "PodScheduled false counts as assumed", summary: one8,
			pods: []*corev1.Pod{
				cpuPod("a", "3").Condition(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable").Obj(),
				cpuPod("b", "3").Condition(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable").Obj(),
			}, pod: inEast(cpuPod("p", "3")), wantCode: fwk.Unschedulable, wantMessage: "2 CPU < 3 CPU"},
		{name: "one before, one after: 5 CPU pod", summary: one8,
			pods: []*corev1.Pod{before("a", "3"), after("b", "3")}, pod: inEast(cpuPod("p", "5"))},
		{name: "one before, one after: 6 CPU pod", summary: one8,
			pods: []*corev1.Pod{before("a", "3"), after("b", "3")}, pod: inEast(cpuPod("p", "6")),
			wantCode: fwk.Unschedulable, wantMessage: "less 1 pods bound since the last report, is 5 CPU < 6 CPU"},
		{name: "bound at the summary time counts as since", summary: one8,
			pods: []*corev1.Pod{boundAt("a", "3", summaryTime)}, pod: inEast(cpuPod("p", "6")),
			wantCode: fwk.Unschedulable, wantMessage: "5 CPU < 6 CPU"},
		{name: "unreadable summary time: every pod counts", summary: noTime,
			pods: []*corev1.Pod{boundAt("a", "3", longAgo), boundAt("b", "3", longAgo)}, pod: inEast(cpuPod("p", "3")),
			wantCode: fwk.Unschedulable, wantMessage: "2 CPU < 3 CPU"},
		{name: "bound pods take from the groups' free capacity", summary: summaryOf(regionGroup("east", shapes("6", "2"))),
			pods: []*corev1.Pod{after("small", "1"), after("large", "6")}, pod: inEast(cpuPod("p", "2")),
			wantCode: fwk.Unschedulable, wantMessage: "is 1 CPU < 2 CPU"},
		{name: "bound pods take from the groups' free capacity: 1 CPU left", summary: summaryOf(regionGroup("east", shapes("6", "2"))),
			pods: []*corev1.Pod{after("small", "1"), after("large", "6")}, pod: inEast(cpuPod("p", "1"))},
		{name: "a bound pod leaves the largest shape to judge fragmentation", summary: summaryOf(regionGroup("east", shapes("8", "4"))),
			pods: []*corev1.Pod{after("a", "5")}, pod: inEast(cpuPod("p", "4"))},
		{name: "bound pods beyond the free capacity", summary: summaryOf(regionGroup("east", shapes("4"))),
			pods: []*corev1.Pod{assumed("a", "6")}, pod: inEast(cpuPod("p", "1")),
			wantCode: fwk.Unschedulable, wantMessage: "is 0 CPU < 1 CPU"},
		{name: "bound pods take pod slots", summary: summaryOf(regionGroup("east", []corev1.ResourceList{shapeOf("8", "32Gi", "2")})),
			pods: []*corev1.Pod{assumed("a", "1"), assumed("b", "1")}, pod: inEast(cpuPod("p", "1")),
			wantCode: fwk.Unschedulable, wantMessage: "is 0 pods < 1 pods"},
		// Where the child put them is unknown: they take from the free
		// capacity of all the groups that match the pod.
		{name: "bound pods over two matching groups: 8 CPU pod", summary: summaryOf(regionGroup("east", shapes("8")), regionGroup("west", shapes("8"))),
			pods: []*corev1.Pod{after("a", "3"), after("b", "3")}, pod: cpuPod("p", "8").Obj()},
		{name: "bound pods over two matching groups: 11 CPU left is too little for 12", summary: summaryOf(regionGroup("east", shapes("16")), regionGroup("west", shapes("8"))),
			pods: []*corev1.Pod{after("a", "6"), after("b", "7")}, pod: cpuPod("p", "12").Obj(),
			wantCode: fwk.Unschedulable, wantMessage: "is 11 CPU < 12 CPU"},
		{name: "bound pods over two matching groups: 5 CPU pod", summary: summaryOf(regionGroup("east", shapes("8")), regionGroup("west", shapes("8"))),
			pods: []*corev1.Pod{after("a", "3"), after("b", "3")}, pod: cpuPod("p", "5").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, nil)
			node := virtualNode(t, "256", tt.summary)
			orig := node.DeepCopy()
			got := filter(pl, tt.pod, nodeInfo(node, tt.pods...))
			require.Equal(t, tt.wantCode, got.Code(), got.Message())
			require.Contains(t, got.Message(), tt.wantMessage)
			schedtest.RequireCleanFailure(t, tt.pod, got)
			require.Equal(t, orig, node)
			// Judged again, the same: nothing is taken out of the summary
			// for good.
			again := filter(pl, tt.pod, nodeInfo(node, tt.pods...))
			require.Equal(t, got.Code(), again.Code())
			require.Equal(t, got.Message(), again.Message())
		})
	}
}

// An extended resource an admin advertised on the virtual node itself, which
// no group of its summary holds, is the node's: NodeResourcesFit counts it,
// the shapes do not; one the groups hold is judged by the shapes.
func TestFilterNodeOwnResource(t *testing.T) {
	pl := newPlugin(t, nil)
	shape := shapeOf("8", "32Gi", "110")
	shape["nvidia.com/gpu"] = resource.MustParse("1")
	gpus := regionGroup("east", []corev1.ResourceList{shape})
	node := virtualNode(t, "256", summaryOf(gpus))
	node.Status.Allocatable["example.com/licence"] = resource.MustParse("5")
	node.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("1")
	pod := func(r corev1.ResourceName, n string) *corev1.Pod {
		return inEast(st.MakePod().Name("p").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", r: n}))
	}
	got := filter(pl, pod("example.com/licence", "2"), nodeInfo(node))
	require.True(t, got.IsSuccess(), got.Message())
	got = filter(pl, pod("nvidia.com/gpu", "2"), nodeInfo(node))
	require.Equal(t, fwk.Unschedulable, got.Code())
	require.Contains(t, got.Message(), "largest free shape 1 nvidia.com/gpu < 2 nvidia.com/gpu")
	got = filter(pl, pod("example.com/other", "1"), nodeInfo(node))
	require.Equal(t, fwk.Unschedulable, got.Code(), "advertised nowhere: the shapes judge it")
}

func TestScheduledAt(t *testing.T) {
	at := summaryTime.Add(time.Minute)
	tests := []struct {
		name       string
		pod        *corev1.Pod
		want       time.Time
		wantFuture bool
	}{
		{name: "bound", pod: boundAt("p", "1", at), want: at},
		{name: "no condition", pod: cpuPod("p", "1").Obj(), wantFuture: true},
		{name: "not scheduled", pod: cpuPod("p", "1").Condition(corev1.PodScheduled, corev1.ConditionFalse, "").Obj(), wantFuture: true},
		{name: "other conditions only", pod: cpuPod("p", "1").Condition(corev1.PodReady, corev1.ConditionTrue, "").Obj(), wantFuture: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scheduledAt(tt.pod)
			if tt.wantFuture {
				require.True(t, got.After(time.Now().AddDate(1000, 0, 0)), "got %v", got)
				return
			}
			require.True(t, tt.want.Equal(got), "got %v", got)
		})
	}
}

func TestShortfall(t *testing.T) {
	tests := []struct {
		name  string
		req   corev1.ResourceList
		shape corev1.ResourceList
		want  corev1.ResourceName
	}{
		{name: "fits", req: shapeOf("2", "1Gi", "1"), shape: shapeOf("2", "1Gi", "1")},
		{name: "cpu short", req: shapeOf("3", "1Gi", "1"), shape: shapeOf("2", "1Gi", "1"), want: corev1.ResourceCPU},
		{name: "memory short", req: shapeOf("1", "2Gi", "1"), shape: shapeOf("2", "1Gi", "1"), want: corev1.ResourceMemory},
		{name: "first short resource by name", req: shapeOf("3", "2Gi", "2"), shape: shapeOf("2", "1Gi", "1"), want: corev1.ResourceCPU},
		{name: "resource the shape lacks", req: shapeOf("1", "", "1"), shape: shapeOf("2", "1Gi", ""), want: corev1.ResourcePods},
		{name: "zero requests need nothing", req: shapeOf("0", "0", "1"), shape: shapeOf("", "", "1")},
		{name: "empty request", req: corev1.ResourceList{}, shape: corev1.ResourceList{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, shortfall(sortedNames(tt.req), tt.req, tt.shape))
		})
	}
}

func TestLarger(t *testing.T) {
	require.True(t, larger(shapeOf("8", "1Gi", "1"), shapeOf("4", "64Gi", "1")), "CPU first")
	require.True(t, larger(shapeOf("4", "8Gi", "1"), shapeOf("4", "4Gi", "1")), "then memory")
	require.False(t, larger(shapeOf("4", "4Gi", "1"), shapeOf("4", "4Gi", "1")))
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		r    corev1.ResourceName
		q    string
		want string
	}{
		{r: corev1.ResourceCPU, q: "4", want: "4 CPU"},
		{r: corev1.ResourceCPU, q: "1500m", want: "1500m CPU"},
		{r: corev1.ResourceMemory, q: "8Gi", want: "8Gi memory"},
		{r: corev1.ResourcePods, q: "0", want: "0 pods"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			require.Equal(t, tt.want, describe(tt.r, resource.MustParse(tt.q)))
		})
	}
}

// What the pods bound since the last report use is kept per node between
// pods (a virtual node holds thousands), and counted again whenever the
// node's contents or its summary change: each verdict below is what a
// fresh count gives.
func TestBoundSinceFollowsTheNode(t *testing.T) {
	pl := newPlugin(t, nil)
	one8 := summaryOf(regionGroup("east", shapes("8")))
	node := virtualNode(t, "256", one8)
	p3 := inEast(cpuPod("p", "3"))
	ni := nodeInfo(node, after("a", "3"))
	require.True(t, filter(pl, p3, ni).IsSuccess(), "5 CPU left")
	require.True(t, filter(pl, p3, ni).IsSuccess(), "the same contents again")

	ni.AddPod(after("b", "3"))
	got := filter(pl, p3, ni)
	require.Equal(t, fwk.Unschedulable, got.Code(), "a pod added: counted again")
	require.Contains(t, got.Message(), "less 2 pods bound since the last report, is 2 CPU < 3 CPU")
	require.Equal(t, got.Message(), filter(pl, p3, ni).Message(), "kept")

	// Another NodeInfo of the same node (a snapshot of other contents):
	// its own count.
	require.True(t, filter(pl, p3, nodeInfo(node, after("a", "3"))).IsSuccess())
	require.Equal(t, fwk.Unschedulable, filter(pl, p3, ni).Code())

	// A new report, after both pods were bound: they are in it.
	newer := summaryOf(regionGroup("east", shapes("8")))
	newer.Time = summaryTime.Add(time.Hour).Format(time.RFC3339)
	ni.SetNode(virtualNode(t, "256", newer))
	require.True(t, filter(pl, p3, ni).IsSuccess(), "a new summary: counted again")

	// A pod taken away under the old summary.
	ni.SetNode(node)
	require.Equal(t, fwk.Unschedulable, filter(pl, p3, ni).Code())
	pods := ni.GetPods()
	require.NoError(t, ni.RemovePod(klog.Background(), pods[len(pods)-1].GetPod()))
	require.True(t, filter(pl, p3, ni).IsSuccess(), "a pod removed: counted again")
}
