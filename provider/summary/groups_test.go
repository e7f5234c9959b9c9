package summary

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

func TestComputeGroups(t *testing.T) {
	const (
		region = "topology.kubernetes.io/region"
		zone   = "topology.kubernetes.io/zone"
	)
	keys := []string{region, zone}
	cpu := func(v string) corev1.ResourceList { return rl("cpu", v) }
	ta := taint("a", "1", corev1.TaintEffectNoSchedule)
	tb := taint("b", "", corev1.TaintEffectPreferNoSchedule)
	tests := []struct {
		name   string
		parent string
		nodes  []*corev1.Node
		pods   []*corev1.Pod
		want   []api.Group
	}{
		{
			name: "real nodes are grouped by the group keys they carry",
			nodes: []*corev1.Node{
				newNode("a", cpu("1"), withLabels(region, "east", zone, "e1", "other", "x")),
				newNode("b", cpu("2"), withLabels(region, "east", zone, "e1", "other", "y")),
				newNode("c", cpu("4"), withLabels(region, "east")),
				newNode("d", cpu("8")),
			},
			want: []api.Group{
				{Nodes: 1, Allocatable: cpu("8"), Free: cpu("8"), Shapes: []corev1.ResourceList{cpu("8")}},
				{Labels: map[string]string{region: "east"}, Nodes: 1, Allocatable: cpu("4"), Free: cpu("4"), Shapes: []corev1.ResourceList{cpu("4")}},
				{Labels: map[string]string{region: "east", zone: "e1"}, Nodes: 2, Allocatable: cpu("3"), Free: cpu("3"), Shapes: []corev1.ResourceList{cpu("2"), cpu("1")}},
			},
		},
		{
			name: "taints are part of the group, sorted, transient ones ignored",
			nodes: []*corev1.Node{
				newNode("a", cpu("1"), withTaints(tb, ta)),
				newNode("b", cpu("1"), withTaints(ta, taint("node.kubernetes.io/unreachable", "", corev1.TaintEffectNoExecute), tb)),
				newNode("c", cpu("1"), withTaints(taint("node.kubernetes.io/memory-pressure", "", corev1.TaintEffectNoSchedule))),
			},
			want: []api.Group{
				{Nodes: 1, Allocatable: cpu("1"), Free: cpu("1"), Shapes: []corev1.ResourceList{cpu("1")}},
				{Taints: []corev1.Taint{ta, tb}, Nodes: 2, Allocatable: cpu("2"), Free: cpu("2"), Shapes: []corev1.ResourceList{cpu("1"), cpu("1")}},
			},
		},
		{
			name:  "free is clamped per node: an overcommitted node lends nothing",
			nodes: []*corev1.Node{newNode("a", rl("cpu", "2", "pods", "10")), newNode("b", rl("cpu", "2", "pods", "10"))},
			pods:  []*corev1.Pod{newPod("x", "a", cpu("3")), newPod("y", "b", cpu("500m"))},
			want: []api.Group{{
				Nodes:       2,
				Allocatable: rl("cpu", "4", "pods", "20"),
				Free:        rl("cpu", "1500m", "pods", "18"),
				Shapes:      []corev1.ResourceList{rl("cpu", "1500m", "pods", "9"), rl("cpu", "0", "pods", "9")},
			}},
		},
		{
			name:   "pods the parent sent use the group's free too",
			parent: "p",
			nodes:  []*corev1.Node{newNode("a", cpu("2"))},
			pods:   []*corev1.Pod{newPod("x", "a", cpu("1"), withOrigin("p/uid"))},
			want:   []api.Group{{Nodes: 1, Allocatable: cpu("2"), Free: cpu("1"), Shapes: []corev1.ResourceList{cpu("1")}}},
		},
		{
			name: "a virtual node's groups merge into the same labels and taints",
			nodes: []*corev1.Node{
				newNode("a", cpu("2"), withLabels(region, "east"), withTaints(ta)),
				newNode("x", cpu("100"), withLabels(region, "west"), virtualOf(t, api.Summary{Cluster: "x", Covered: []string{"x"}, Groups: []api.Group{
					{Labels: map[string]string{region: "east"}, Taints: []corev1.Taint{ta}, Nodes: 3, Allocatable: cpu("12"), Free: cpu("7"),
						Shapes: []corev1.ResourceList{cpu("3"), cpu("2500m"), cpu("1500m")}},
					{Labels: map[string]string{region: "east"}, Nodes: 1, Allocatable: cpu("4"), Free: cpu("4"), Shapes: []corev1.ResourceList{cpu("4")}},
				}})),
			},
			pods: []*corev1.Pod{newPod("p", "x", cpu("50"))},
			want: []api.Group{
				{Labels: map[string]string{region: "east"}, Nodes: 1, Depth: 1, Allocatable: cpu("4"), Free: cpu("4"), Shapes: []corev1.ResourceList{cpu("4")}},
				{Labels: map[string]string{region: "east"}, Taints: []corev1.Taint{ta}, Nodes: 4, Allocatable: cpu("14"), Free: cpu("9"),
					Shapes: []corev1.ResourceList{cpu("3"), cpu("2500m"), cpu("2"), cpu("1500m")}},
			},
		},
		{
			name: "groups of two virtual nodes merge",
			nodes: []*corev1.Node{
				newNode("x", cpu("1"), virtualOf(t, api.Summary{Cluster: "x", Covered: []string{"x"}, Groups: []api.Group{
					{Labels: map[string]string{zone: "z"}, Nodes: 1, Allocatable: cpu("1"), Free: cpu("1"), Shapes: []corev1.ResourceList{cpu("1")}}}})),
				newNode("y", cpu("2"), virtualOf(t, api.Summary{Cluster: "y", Covered: []string{"y"}, Groups: []api.Group{
					{Labels: map[string]string{zone: "z"}, Nodes: 2, Allocatable: cpu("2"), Free: cpu("2"), Shapes: []corev1.ResourceList{cpu("1"), cpu("1")}}}})),
			},
			want: []api.Group{{Labels: map[string]string{zone: "z"}, Nodes: 3, Depth: 1, Allocatable: cpu("3"), Free: cpu("3"),
				Shapes: []corev1.ResourceList{cpu("1"), cpu("1"), cpu("1")}}},
		},
		{
			name: "a group is as deep as its nearest nodes",
			nodes: []*corev1.Node{
				newNode("x", cpu("1"), virtualOf(t, api.Summary{Cluster: "x", Covered: []string{"x", "x1", "x2"}, Groups: []api.Group{
					{Labels: map[string]string{zone: "z"}, Nodes: 1, Depth: 2, Allocatable: cpu("1"), Free: cpu("1"), Shapes: []corev1.ResourceList{cpu("1")}},
					{Labels: map[string]string{zone: "deep"}, Nodes: 1, Depth: 2, Allocatable: cpu("1"), Free: cpu("1"), Shapes: []corev1.ResourceList{cpu("1")}}}})),
				newNode("y", cpu("2"), virtualOf(t, api.Summary{Cluster: "y", Covered: []string{"y"}, Groups: []api.Group{
					{Labels: map[string]string{zone: "z"}, Nodes: 1, Allocatable: cpu("2"), Free: cpu("2"), Shapes: []corev1.ResourceList{cpu("2")}}}})),
			},
			want: []api.Group{
				{Labels: map[string]string{zone: "deep"}, Nodes: 1, Depth: 3, Allocatable: cpu("1"), Free: cpu("1"), Shapes: []corev1.ResourceList{cpu("1")}},
				{Labels: map[string]string{zone: "z"}, Nodes: 2, Depth: 1, Allocatable: cpu("3"), Free: cpu("3"), Shapes: []corev1.ResourceList{cpu("2"), cpu("1")}},
			},
		},
		{
			name: "a child's group labels are projected on our group keys",
			nodes: []*corev1.Node{
				newNode("a", cpu("1"), withLabels(region, "east")),
				newNode("x", cpu("1"), virtualOf(t, api.Summary{Cluster: "x", Covered: []string{"x"}, Groups: []api.Group{
					{Labels: map[string]string{region: "east", "example.com/rack": "r1"}, Nodes: 1, Allocatable: cpu("1"), Free: cpu("1"), Shapes: []corev1.ResourceList{cpu("1")}}}})),
			},
			want: []api.Group{{Labels: map[string]string{region: "east"}, Nodes: 2, Allocatable: cpu("2"), Free: cpu("2"),
				Shapes: []corev1.ResourceList{cpu("1"), cpu("1")}}},
		},
		{
			name:   "left out virtual nodes bring no group",
			parent: "p",
			nodes: []*corev1.Node{
				newNode("x", cpu("1"), virtualOf(t, api.Summary{Cluster: "x", Covered: []string{"p", "x"}, Groups: []api.Group{{Nodes: 1, Allocatable: cpu("1")}}})),
				newNode("y", cpu("1"), withAnnotation(api.AnnotationSummary, "[]")),
				newNode("z", cpu("1"), cordoned(), virtualOf(t, api.Summary{Cluster: "z", Covered: []string{"z"}, Groups: []api.Group{{Nodes: 1, Allocatable: cpu("1")}}})),
			},
			want: nil,
		},
		{
			name: "at most MaxShapes shapes, largest cpu first",
			nodes: []*corev1.Node{
				newNode("a", cpu("1")), newNode("b", cpu("6")), newNode("c", cpu("3")),
				newNode("d", cpu("5")), newNode("e", cpu("2")), newNode("f", cpu("4")),
			},
			want: []api.Group{{Nodes: 6, Allocatable: cpu("21"), Free: cpu("21"),
				Shapes: []corev1.ResourceList{cpu("6"), cpu("5"), cpu("4"), cpu("3")}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(Input{Cluster: "c", Parent: tt.parent, GroupKeys: keys, Nodes: tt.nodes, Pods: tt.pods})
			requireNoDiff(t, tt.want, got.Summary.Groups)
		})
	}
}

func TestComputeGroupsRegionExample(t *testing.T) {
	const region = "topology.kubernetes.io/region"
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		wantLabels  map[string]string
		wantRegions []string
	}{
		{
			name:        "nodes in east and west: no region label, an east and a west group",
			nodes:       []*corev1.Node{newNode("a", rl("cpu", "1"), withLabels(region, "west")), newNode("b", rl("cpu", "1"), withLabels(region, "east"))},
			wantLabels:  map[string]string{},
			wantRegions: []string{"east", "west"},
		},
		{
			name:        "nodes all in east: a region label, one group",
			nodes:       []*corev1.Node{newNode("a", rl("cpu", "1"), withLabels(region, "east")), newNode("b", rl("cpu", "1"), withLabels(region, "east"))},
			wantLabels:  map[string]string{region: "east"},
			wantRegions: []string{"east"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(Input{Cluster: "c", Nodes: tt.nodes})
			requireNoDiff(t, tt.wantLabels, got.Labels)
			var regions []string
			for _, g := range got.Summary.Groups {
				regions = append(regions, g.Labels[region])
			}
			requireNoDiff(t, tt.wantRegions, regions)
		})
	}
}

func TestBestShapes(t *testing.T) {
	tests := []struct {
		name   string
		shapes []corev1.ResourceList
		want   []corev1.ResourceList
	}{
		{name: "none", shapes: nil, want: nil},
		{
			name:   "cpu descending, then memory descending",
			shapes: []corev1.ResourceList{rl("cpu", "1", "memory", "8Gi"), rl("cpu", "2", "memory", "1Gi"), rl("cpu", "1", "memory", "16Gi")},
			want:   []corev1.ResourceList{rl("cpu", "2", "memory", "1Gi"), rl("cpu", "1", "memory", "16Gi"), rl("cpu", "1", "memory", "8Gi")},
		},
		{
			name:   "quantities compare by value, a missing one is zero",
			shapes: []corev1.ResourceList{rl("memory", "1Gi"), rl("cpu", "1500m"), rl("cpu", "2")},
			want:   []corev1.ResourceList{rl("cpu", "2"), rl("cpu", "1500m"), rl("memory", "1Gi")},
		},
		{
			name: "at most MaxShapes, the largest",
			shapes: []corev1.ResourceList{
				rl("cpu", "1"), rl("cpu", "2"), rl("cpu", "3"), rl("cpu", "4"), rl("cpu", "5"), rl("cpu", "6"),
			},
			want: []corev1.ResourceList{rl("cpu", "6"), rl("cpu", "5"), rl("cpu", "4"), rl("cpu", "3")},
		},
		{
			name: "ties are broken by the other resources, largest first",
			shapes: []corev1.ResourceList{
				rl("cpu", "1", "memory", "1Gi", "pods", "3"),
				rl("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1", "pods", "1"),
				rl("cpu", "1", "memory", "1Gi", "pods", "5"),
			},
			want: []corev1.ResourceList{
				rl("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1", "pods", "1"),
				rl("cpu", "1", "memory", "1Gi", "pods", "5"),
				rl("cpu", "1", "memory", "1Gi", "pods", "3"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireNoDiff(t, tt.want, bestShapes(tt.shapes))
			// The order of the input does not matter.
			reversed := slices.Clone(tt.shapes)
			slices.Reverse(reversed)
			requireNoDiff(t, tt.want, bestShapes(reversed))
		})
	}
}

func TestBestShapesTextTieBreak(t *testing.T) {
	tests := []struct {
		name string
		a, b corev1.ResourceList
	}{
		{name: "equal values written otherwise", a: rl("memory", "1024Mi"), b: rl("memory", "1Gi")},
		{name: "equal values, one resource present at zero", a: rl("cpu", "1", "pods", "0"), b: rl("cpu", "1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ab := bestShapes([]corev1.ResourceList{tt.a, tt.b})
			ba := bestShapes([]corev1.ResourceList{tt.b, tt.a})
			if text(ab[0]) != text(ba[0]) || text(ab[1]) != text(ba[1]) {
				t.Fatalf("order depends on input: %v vs %v", ab, ba)
			}
		})
	}
}
