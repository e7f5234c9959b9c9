package summary

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nestlet/nestlet/api"
)

func TestComputeCountsNodes(t *testing.T) {
	small := func() corev1.ResourceList { return rl("cpu", "2", "memory", "4Gi", "pods", "110") }
	child := api.Summary{Cluster: "c2", Covered: []string{"c2"}}
	tests := []struct {
		name   string
		parent string
		nodes  []*corev1.Node
		want   corev1.ResourceList
	}{
		{
			name:  "real nodes are summed",
			nodes: []*corev1.Node{newNode("a", small()), newNode("b", rl("cpu", "3", "memory", "8Gi", "pods", "110"))},
			want:  rl("cpu", "5", "memory", "12Gi", "pods", "220"),
		},
		{
			name:  "a virtual node counts its allocatable",
			nodes: []*corev1.Node{newNode("a", small()), newNode("c2", rl("cpu", "10", "nvidia.com/gpu", "2"), virtualOf(t, child))},
			want:  rl("cpu", "12", "memory", "4Gi", "pods", "110", "nvidia.com/gpu", "2"),
		},
		{
			name:  "a virtual node whose summary does not parse contributes nothing",
			nodes: []*corev1.Node{newNode("a", small()), newNode("c2", rl("cpu", "10"), withAnnotation(api.AnnotationSummary, "{not json"))},
			want:  small(),
		},
		{
			name:   "split horizon leaves out a virtual node that covers the parent",
			parent: "p",
			nodes:  []*corev1.Node{newNode("a", small()), newNode("c2", rl("cpu", "10"), virtualOf(t, api.Summary{Cluster: "c2", Covered: []string{"c2", "p"}}))},
			want:   small(),
		},
		{
			name:   "a virtual node that does not cover the parent counts",
			parent: "p",
			nodes:  []*corev1.Node{newNode("a", small()), newNode("c2", rl("cpu", "10"), virtualOf(t, api.Summary{Cluster: "c2", Covered: []string{"c2", "c3"}}))},
			want:   rl("cpu", "12", "memory", "4Gi", "pods", "110"),
		},
		{
			name:  "without a parent there is no split horizon",
			nodes: []*corev1.Node{newNode("a", small()), newNode("c2", rl("cpu", "10"), virtualOf(t, api.Summary{Cluster: "c2", Covered: []string{"", "c2", "p"}}))},
			want:  rl("cpu", "12", "memory", "4Gi", "pods", "110"),
		},
		{
			name:  "a node not ready is left out",
			nodes: []*corev1.Node{newNode("a", small()), newNode("b", small(), withReady(corev1.ConditionFalse))},
			want:  small(),
		},
		{
			name:  "a node of unknown readiness is left out",
			nodes: []*corev1.Node{newNode("a", small()), newNode("b", small(), withReady(corev1.ConditionUnknown))},
			want:  small(),
		},
		{
			name:  "a node without a Ready condition is left out",
			nodes: []*corev1.Node{newNode("a", small()), newNode("b", small(), withoutConditions())},
			want:  small(),
		},
		{
			name:  "a cordoned node is left out",
			nodes: []*corev1.Node{newNode("a", small()), newNode("b", small(), cordoned())},
			want:  small(),
		},
		{
			name:  "a virtual node not ready is left out",
			nodes: []*corev1.Node{newNode("a", small()), newNode("c2", rl("cpu", "10"), virtualOf(t, child), withReady(corev1.ConditionFalse))},
			want:  small(),
		},
		{
			name:  "a node listed twice counts once",
			nodes: []*corev1.Node{newNode("a", small()), newNode("a", small())},
			want:  small(),
		},
		{
			name:  "no counted node advertises nothing",
			nodes: []*corev1.Node{newNode("a", small(), cordoned()), nil},
			want:  corev1.ResourceList{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(Input{Cluster: "c", Parent: tt.parent, Nodes: tt.nodes})
			requireNoDiff(t, tt.want, got.Allocatable)
		})
	}
}

func TestComputeSubtractsPods(t *testing.T) {
	nodes := []*corev1.Node{
		newNode("a", rl("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "100Gi", "nvidia.com/gpu", "2")),
		newNode("gone", rl("cpu", "4"), cordoned()),
	}
	full := func(kv ...string) corev1.ResourceList {
		l := rl("cpu", "4", "memory", "8Gi", "pods", "110", "ephemeral-storage", "100Gi", "nvidia.com/gpu", "2")
		for name, q := range rl(kv...) {
			l[name] = q
		}
		return l
	}
	tests := []struct {
		name   string
		parent string
		pods   []*corev1.Pod
		want   corev1.ResourceList
	}{
		{
			name: "a running pod is subtracted with one pods",
			pods: []*corev1.Pod{newPod("x", "a", rl("cpu", "1", "memory", "1Gi"))},
			want: full("cpu", "3", "memory", "7Gi", "pods", "109"),
		},
		{
			name: "a pending pod bound to a node counts",
			pods: []*corev1.Pod{newPod("x", "a", rl("cpu", "1"), withPhase(corev1.PodPending))},
			want: full("cpu", "3", "pods", "109"),
		},
		{
			name: "an unbound pod does not count",
			pods: []*corev1.Pod{newPod("x", "", rl("cpu", "1"), withPhase(corev1.PodPending))},
			want: full(),
		},
		{
			name: "succeeded and failed pods do not count",
			pods: []*corev1.Pod{
				newPod("x", "a", rl("cpu", "1"), withPhase(corev1.PodSucceeded)),
				newPod("y", "a", rl("cpu", "1"), withPhase(corev1.PodFailed)),
			},
			want: full(),
		},
		{
			name: "a pod of a left out or unknown node does not count",
			pods: []*corev1.Pod{newPod("x", "gone", rl("cpu", "1")), newPod("y", "nowhere", rl("cpu", "1")), nil},
			want: full(),
		},
		{
			name: "init and sidecar containers count as the scheduler counts them",
			pods: []*corev1.Pod{newPod("x", "a", rl("cpu", "1"),
				withInit(rl("cpu", "500m"), true),
				withInit(rl("cpu", "3"), false))},
			want: full("cpu", "500m", "pods", "109"),
		},
		{
			name: "overhead counts",
			pods: []*corev1.Pod{newPod("x", "a", rl("cpu", "1"), withOverhead(rl("cpu", "250m", "memory", "64Mi")))},
			want: full("cpu", "2750m", "memory", "8128Mi", "pods", "109"),
		},
		{
			name: "pod-level requests count",
			pods: []*corev1.Pod{newPod("x", "a", rl("cpu", "1"), withPodLevel(rl("cpu", "2")))},
			want: full("cpu", "2", "pods", "109"),
		},
		{
			name: "extended resources and ephemeral storage are subtracted",
			pods: []*corev1.Pod{newPod("x", "a", rl("nvidia.com/gpu", "1", "ephemeral-storage", "10Gi"))},
			want: full("nvidia.com/gpu", "1", "ephemeral-storage", "90Gi", "pods", "109"),
		},
		{
			name:   "a pod the parent sent is not subtracted",
			parent: "p",
			pods:   []*corev1.Pod{newPod("x", "a", rl("cpu", "1"), withOrigin("p/0123"))},
			want:   full(),
		},
		{
			name:   "a pod another cluster sent is subtracted",
			parent: "p",
			pods:   []*corev1.Pod{newPod("x", "a", rl("cpu", "1"), withOrigin("q/0123"))},
			want:   full("cpu", "3", "pods", "109"),
		},
		{
			name:   "the origin must name the parent up to the slash",
			parent: "p",
			pods:   []*corev1.Pod{newPod("x", "a", rl("cpu", "1"), withOrigin("pp/0123")), newPod("y", "a", rl("cpu", "1"), withOrigin("p"))},
			want:   full("cpu", "2", "pods", "108"),
		},
		{
			name: "without a parent every pod is subtracted",
			pods: []*corev1.Pod{newPod("x", "a", rl("cpu", "1"), withOrigin("/0123")), newPod("y", "a", rl("cpu", "1"), withOrigin("p/0123"))},
			want: full("cpu", "2", "pods", "108"),
		},
		{
			name: "arithmetic is exact",
			pods: []*corev1.Pod{newPod("x", "a", rl("cpu", "2900m")), newPod("y", "a", rl("cpu", "100m", "nvidia.com/gpu", "1100m"))},
			want: full("cpu", "1", "nvidia.com/gpu", "900m", "pods", "108"),
		},
		{
			name: "no quantity goes below zero",
			pods: []*corev1.Pod{newPod("x", "a", rl("cpu", "5", "memory", "9Gi", "nvidia.com/gpu", "3"))},
			want: full("cpu", "0", "memory", "0", "nvidia.com/gpu", "0", "pods", "109"),
		},
		{
			name: "a resource no node offers is not advertised",
			pods: []*corev1.Pod{newPod("x", "a", rl("example.com/foo", "1"))},
			want: full("pods", "109"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(Input{Cluster: "c", Parent: tt.parent, Nodes: nodes, Pods: tt.pods})
			requireNoDiff(t, tt.want, got.Allocatable)
		})
	}
}

func TestComputeIsExact(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		want  map[corev1.ResourceName]string
	}{
		{
			name:  "900m and 100m make exactly one cpu",
			nodes: []*corev1.Node{newNode("a", rl("cpu", "900m")), newNode("b", rl("cpu", "100m"))},
			want:  map[corev1.ResourceName]string{corev1.ResourceCPU: "1"},
		},
		{
			name:  "a fractional gpu stays fractional",
			nodes: []*corev1.Node{newNode("a", rl("nvidia.com/gpu", "0.9"))},
			want:  map[corev1.ResourceName]string{"nvidia.com/gpu": "900m"},
		},
		{
			name:  "a tenth taken from one cpu ten times leaves nothing",
			nodes: []*corev1.Node{newNode("a", rl("cpu", "1"))},
			pods: func() []*corev1.Pod {
				var ps []*corev1.Pod
				for range 10 {
					ps = append(ps, newPod("x", "a", rl("cpu", "0.1")))
				}
				return ps
			}(),
			want: map[corev1.ResourceName]string{corev1.ResourceCPU: "0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(Input{Cluster: "c", Nodes: tt.nodes, Pods: tt.pods})
			for name, want := range tt.want {
				q := got.Allocatable[name]
				require.Equal(t, want, q.String(), name)
			}
		})
	}
}

func TestComputeSummary(t *testing.T) {
	alloc := func() corev1.ResourceList { return rl("cpu", "1") }
	group := func(region string) api.Group {
		return api.Group{Labels: map[string]string{"topology.kubernetes.io/region": region}, Nodes: 1, Allocatable: alloc(), Free: alloc(), Shapes: []corev1.ResourceList{alloc()}}
	}
	tests := []struct {
		name   string
		parent string
		keys   []string
		nodes  []*corev1.Node
		want   api.Summary
	}{
		{
			name:  "only real nodes",
			nodes: []*corev1.Node{newNode("a", alloc())},
			want: api.Summary{Cluster: "c", Covered: []string{"c"}, Clusters: 1, Depth: 0, GroupKeys: api.DefaultGroupKeys,
				Groups: []api.Group{{Nodes: 1, Allocatable: alloc(), Free: alloc(), Shapes: []corev1.ResourceList{alloc()}}}},
		},
		{
			name:  "no node",
			nodes: nil,
			want:  api.Summary{Cluster: "c", Covered: []string{"c"}, Clusters: 1, GroupKeys: api.DefaultGroupKeys},
		},
		{
			name:   "counted virtual nodes add their coverage and depth",
			parent: "p",
			keys:   []string{},
			nodes: []*corev1.Node{
				newNode("x", alloc(), virtualOf(t, api.Summary{Cluster: "x", Covered: []string{"x"}, Depth: 0})),
				newNode("y", alloc(), virtualOf(t, api.Summary{Cluster: "y", Covered: []string{"c", "y", "z"}, Depth: 2})),
				newNode("q", alloc(), virtualOf(t, api.Summary{Cluster: "q", Covered: []string{"p", "q"}, Depth: 7})),
				newNode("r", alloc(), virtualOf(t, api.Summary{Cluster: "r", Covered: []string{"r"}, Depth: 9}), cordoned()),
			},
			// Version 1 children list every cluster, so all are branches
			// as far as c knows; c has children.
			want: api.Summary{Cluster: "c", Covered: []string{"c", "x", "y", "z"}, Clusters: 4, Branches: []string{"c", "x", "y", "z"}, Depth: 3, GroupKeys: []string{}},
		},
		{
			name:  "groups are sorted whatever the order of nodes",
			keys:  []string{"topology.kubernetes.io/region"},
			nodes: []*corev1.Node{newNode("w", alloc(), withLabels("topology.kubernetes.io/region", "west")), newNode("e", alloc(), withLabels("topology.kubernetes.io/region", "east"))},
			want: api.Summary{Cluster: "c", Covered: []string{"c"}, Clusters: 1, GroupKeys: []string{"topology.kubernetes.io/region"},
				Groups: []api.Group{group("east"), group("west")}},
		},
	}
	now := time.Date(2025, 3, 4, 12, 30, 15, 999, time.FixedZone("x", 2*3600))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(Input{Cluster: "c", Parent: tt.parent, GroupKeys: tt.keys, Nodes: tt.nodes, Now: now})
			tt.want.Time, tt.want.Version = "2025-03-04T10:30:15Z", api.SummaryVersion
			requireNoDiff(t, tt.want, got.Summary)
		})
	}
}

func TestComputeDoesNotShareGroupKeys(t *testing.T) {
	tests := []struct {
		name string
		keys []string
	}{
		{name: "default keys", keys: nil},
		{name: "given keys", keys: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]string(nil), api.DefaultGroupKeys...)
			keys := append([]string(nil), tt.keys...)
			got := Compute(Input{Cluster: "c", GroupKeys: tt.keys})
			got.Summary.GroupKeys[0] = "changed"
			require.Equal(t, before, api.DefaultGroupKeys)
			if tt.keys != nil {
				require.Equal(t, keys, tt.keys)
			}
		})
	}
}

func TestComputeDoesNotMutateInputs(t *testing.T) {
	// A quantity held as a decimal shares its value when copied: a careless
	// Add or Sub would change the input.
	dec := resource.MustParse("1")
	dec.AsDec()
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
	}{
		{
			name:  "pod-level requests with overhead",
			nodes: []*corev1.Node{newNode("a", corev1.ResourceList{corev1.ResourceCPU: dec.DeepCopy()})},
			pods:  []*corev1.Pod{newPod("x", "a", rl("cpu", "1"), withPodLevel(corev1.ResourceList{corev1.ResourceCPU: dec.DeepCopy()}), withOverhead(rl("cpu", "100m")))},
		},
		{
			name: "decimal quantities everywhere",
			nodes: []*corev1.Node{
				newNode("a", corev1.ResourceList{corev1.ResourceCPU: dec.DeepCopy(), corev1.ResourcePods: dec.DeepCopy()}),
				newNode("b", corev1.ResourceList{corev1.ResourceCPU: dec.DeepCopy(), corev1.ResourcePods: dec.DeepCopy()}),
			},
			pods: []*corev1.Pod{
				newPod("x", "a", corev1.ResourceList{corev1.ResourceCPU: dec.DeepCopy()}, withOverhead(corev1.ResourceList{corev1.ResourceCPU: dec.DeepCopy()})),
				newPod("y", "b", corev1.ResourceList{corev1.ResourceCPU: dec.DeepCopy()}, withInit(corev1.ResourceList{corev1.ResourceCPU: dec.DeepCopy()}, true)),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := make([]*corev1.Node, len(tt.nodes))
			for i, n := range tt.nodes {
				nodes[i] = n.DeepCopy()
			}
			pods := make([]*corev1.Pod, len(tt.pods))
			for i, p := range tt.pods {
				pods[i] = p.DeepCopy()
			}
			Compute(Input{Cluster: "c", Nodes: tt.nodes, Pods: tt.pods})
			require.Equal(t, nodes, tt.nodes)
			require.Equal(t, pods, tt.pods)
		})
	}
}

// TestComputeNested chains three clusters, g under c under p, through the
// wire format: what g reports becomes the virtual node g in c.
func TestComputeNested(t *testing.T) {
	region := "topology.kubernetes.io/region"
	alloc := func() corev1.ResourceList { return rl("cpu", "4", "memory", "8Gi", "pods", "110") }
	tests := []struct {
		name      string
		gPods     []*corev1.Pod
		cPods     []*corev1.Pod
		wantAlloc corev1.ResourceList
		wantGroup api.Group
	}{
		{
			name: "a pod c delegated to g is counted once, by c",
			// In g the delegate of c's pod; in c the pod itself, on node g.
			gPods:     []*corev1.Pod{newPod("d", "g1", rl("cpu", "1"), withOrigin("c/uid-1")), newPod("l", "g1", rl("cpu", "1"))},
			cPods:     []*corev1.Pod{newPod("o", "g", rl("cpu", "1")), newPod("l", "c1", rl("cpu", "1"))},
			wantAlloc: rl("cpu", "5", "memory", "16Gi", "pods", "217"),
			wantGroup: api.Group{
				Labels:      map[string]string{region: "east"},
				Nodes:       2,
				Allocatable: rl("cpu", "8", "memory", "16Gi", "pods", "220"),
				Free:        rl("cpu", "5", "memory", "16Gi", "pods", "217"),
				Shapes:      []corev1.ResourceList{rl("cpu", "3", "memory", "8Gi", "pods", "109"), rl("cpu", "2", "memory", "8Gi", "pods", "108")},
			},
		},
		{
			name:      "a pod p sent down is not subtracted from what c reports to p",
			gPods:     []*corev1.Pod{newPod("d", "g1", rl("cpu", "1"), withOrigin("c/uid-1"))},
			cPods:     []*corev1.Pod{newPod("o", "g", rl("cpu", "1"), withOrigin("p/uid-0"))},
			wantAlloc: rl("cpu", "8", "memory", "16Gi", "pods", "220"),
			wantGroup: api.Group{
				Labels:      map[string]string{region: "east"},
				Nodes:       2,
				Allocatable: rl("cpu", "8", "memory", "16Gi", "pods", "220"),
				Free:        rl("cpu", "7", "memory", "16Gi", "pods", "219"),
				Shapes:      []corev1.ResourceList{rl("cpu", "4", "memory", "8Gi", "pods", "110"), rl("cpu", "3", "memory", "8Gi", "pods", "109")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := Compute(Input{Cluster: "g", Parent: "c", GroupKeys: []string{region},
				Nodes: []*corev1.Node{newNode("g1", alloc(), withLabels(region, "east", "example.com/team", "a"))},
				Pods:  tt.gPods})
			raw, err := json.Marshal(g.Summary)
			require.NoError(t, err)
			vnode := newNode("g", g.Allocatable,
				withLabels(api.LabelNodeType, api.NodeTypeVirtualKubelet, api.LabelCluster, "g", api.LabelNodeRoleCluster, ""),
				withTaints(taint(api.TaintKeyProvider, api.TaintValueProvider, corev1.TaintEffectNoSchedule)),
				withAnnotation(api.AnnotationSummary, string(raw)))
			for k, v := range g.Labels {
				vnode.Labels[k] = v
			}

			c := Compute(Input{Cluster: "c", Parent: "p", GroupKeys: []string{region},
				Nodes: []*corev1.Node{vnode, newNode("c1", alloc(), withLabels(region, "east", "example.com/team", "a"))},
				Pods:  tt.cPods})
			requireNoDiff(t, tt.wantAlloc, c.Allocatable)
			requireNoDiff(t, map[string]string{region: "east", "example.com/team": "a"}, c.Labels)
			requireNoDiff(t, []string{"c", "g"}, c.Summary.Covered)
			require.Equal(t, 1, c.Summary.Depth)
			requireNoDiff(t, []api.Group{tt.wantGroup}, c.Summary.Groups)
		})
	}
}

func TestEqual(t *testing.T) {
	base := func() Result {
		return Result{
			Allocatable: rl("cpu", "1", "memory", "1Gi"),
			Labels:      map[string]string{"k": "v"},
			Summary: api.Summary{Cluster: "c", Covered: []string{"c"}, GroupKeys: []string{"k"}, Time: "2025-01-01T00:00:00Z",
				Groups: []api.Group{{Labels: map[string]string{"k": "v"}, Nodes: 1, Allocatable: rl("cpu", "1"), Free: rl("cpu", "1"),
					Shapes: []corev1.ResourceList{rl("cpu", "1"), rl("cpu", "500m")}}}},
		}
	}
	tests := []struct {
		name   string
		base   func(*Result) // applied to both sides
		change func(*Result) // applied to one side
		want   bool
	}{
		{name: "identical", change: func(*Result) {}, want: true},
		{name: "time differs", change: func(r *Result) { r.Summary.Time = "2026-01-01T00:00:00Z" }, want: true},
		{name: "same quantity written otherwise", change: func(r *Result) {
			r.Allocatable = rl("cpu", "1000m", "memory", "1073741824")
			r.Summary.Groups[0].Free = rl("cpu", "1.0")
		}, want: true},
		{
			name: "nil and empty are alike",
			base: func(r *Result) { r.Labels, r.Summary.Groups = nil, nil },
			change: func(r *Result) {
				r.Labels, r.Summary.Groups = map[string]string{}, []api.Group{}
			},
			want: true,
		},
		{
			name:   "nil and empty taints are alike",
			change: func(r *Result) { r.Summary.Groups[0].Taints = []corev1.Taint{} },
			want:   true,
		},
		{name: "allocatable differs", change: func(r *Result) { r.Allocatable = rl("cpu", "1001m", "memory", "1Gi") }, want: false},
		{name: "a resource is missing", change: func(r *Result) { r.Allocatable = rl("cpu", "1") }, want: false},
		{name: "a label differs", change: func(r *Result) { r.Labels["k"] = "w" }, want: false},
		{name: "cluster differs", change: func(r *Result) { r.Summary.Cluster = "d" }, want: false},
		{name: "coverage differs", change: func(r *Result) { r.Summary.Covered = []string{"c", "d"} }, want: false},
		{name: "depth differs", change: func(r *Result) { r.Summary.Depth = 1 }, want: false},
		{name: "group keys differ", change: func(r *Result) { r.Summary.GroupKeys = nil }, want: false},
		{name: "group free differs", change: func(r *Result) { r.Summary.Groups[0].Free = rl("cpu", "0") }, want: false},
		{name: "group nodes differ", change: func(r *Result) { r.Summary.Groups[0].Nodes = 2 }, want: false},
		{name: "group taints differ", change: func(r *Result) {
			r.Summary.Groups[0].Taints = []corev1.Taint{taint("t", "", corev1.TaintEffectNoSchedule)}
		}, want: false},
		{name: "shapes differ", change: func(r *Result) {
			r.Summary.Groups[0].Shapes = r.Summary.Groups[0].Shapes[:1]
		}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			if tt.base != nil {
				tt.base(&a)
				tt.base(&b)
			}
			tt.change(&b)
			require.Equal(t, tt.want, Equal(a, b))
			require.Equal(t, tt.want, Equal(b, a))
		})
	}
}
