package treeaffinity

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/schedtest"
)

const zoneKey = "topology.kubernetes.io/zone"

// The built-in plugin's parallelizer counts its goroutines in the
// scheduler's metrics.
func init() { metrics.Register() }

// handle is the part of fwk.Handle the built-in plugin uses.
type handle struct {
	fwk.Handle
	snapshot *cache.Snapshot
	factory  informers.SharedInformerFactory
}

func (h *handle) SnapshotSharedLister() fwk.SharedLister                 { return h.snapshot }
func (h *handle) Parallelizer() fwk.Parallelizer                         { return parallelize.NewParallelizer(1) }
func (h *handle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }

// virtualNode is the virtual node of cluster name whose subtree has one
// group of the given nodes in zone.
func virtualNode(t *testing.T, name, zone string, nodes int) *corev1.Node {
	t.Helper()
	free := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
	raw, err := json.Marshal(api.Summary{Cluster: name, Covered: []string{name}, GroupKeys: api.DefaultGroupKeys,
		Groups: []api.Group{{Labels: map[string]string{zoneKey: zone}, Nodes: nodes, Allocatable: free, Free: free,
			Shapes: []corev1.ResourceList{free}}}, Time: "2030-01-01T00:00:00Z"})
	require.NoError(t, err)
	return st.MakeNode().Name(name).Label(api.LabelCluster, name).Label(api.LabelNodeType, api.NodeTypeVirtualKubelet).
		Label(corev1.LabelHostname, name).Label(zoneKey, zone).Annotation(api.AnnotationSummary, string(raw)).Obj()
}

// apart is replica i of an app whose replicas may not share a host (or,
// with key, a domain of key).
func apart(i int, key string) *corev1.Pod {
	p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("db-%d", i)).UID(fmt.Sprintf("uid-%d", i)).Label("app", "db").Obj()
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:   key,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		}},
	}}
	return p
}

// fits returns the nodes the pod fits, given the pods already bound.
func fits(t *testing.T, pod *corev1.Pod, nodes []*corev1.Node, bound []*corev1.Pod) []string {
	t.Helper()
	snapshot := cache.NewSnapshot(bound, nodes)
	p, err := New(context.Background(), nil, &handle{snapshot: snapshot, factory: informers.NewSharedInformerFactory(fake.NewClientset(), 0)})
	require.NoError(t, err)
	require.Equal(t, Name, p.Name())
	pl := p.(*TreeAffinity)
	infos, err := snapshot.NodeInfos().List()
	require.NoError(t, err)
	state := framework.NewCycleState()
	_, status := pl.PreFilter(context.Background(), state, pod, infos)
	var out []string
	if status.Code() == fwk.Skip {
		for _, ni := range infos {
			out = append(out, ni.Node().Name)
		}
		slices.Sort(out)
		return out
	}
	require.True(t, status.IsSuccess(), status.Message())
	for _, ni := range infos {
		s := pl.Filter(context.Background(), state, pod, ni)
		schedtest.RequireCleanFailure(t, pod, s)
		if s.IsSuccess() {
			out = append(out, ni.Node().Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestAntiAffinityOverTheHostsOfChildren: replicas that may not share a
// host, on two children of two real nodes each: each child takes two (the
// built-in filter, reading a child's hostname label as one host, took
// one), and a fifth fits nowhere.
func TestAntiAffinityOverTheHostsOfChildren(t *testing.T) {
	nodes := []*corev1.Node{virtualNode(t, "east", "east-a", 2), virtualNode(t, "west", "west-a", 2)}
	var bound []*corev1.Pod
	for i, want := range [][]string{{"east", "west"}, {"east", "west"}, {"west"}, {"west"}, nil} {
		pod := apart(i, corev1.LabelHostname)
		got := fits(t, pod, nodes, bound)
		require.Equal(t, want, got, "replica %d", i)
		if len(got) > 0 {
			pod.Spec.NodeName = got[0]
			bound = append(bound, pod)
		}
	}
	// The replicas' own anti-affinity counts too: a pod of another app
	// fits, one that their terms name is refused where every host holds
	// one of them.
	other := st.MakePod().Namespace("ns").Name("other").UID("other").Label("app", "other").Obj()
	require.Equal(t, []string{"east", "west"}, fits(t, other, nodes, bound))
	intruder := st.MakePod().Namespace("ns").Name("intruder").UID("intruder").Label("app", "db").Obj()
	require.Empty(t, fits(t, intruder, nodes, bound))
}

// TestOtherKeysAsTheBuiltInFilter: anti-affinity on a key the virtual node
// carries (its one zone) is judged as the built-in filter judges it: one
// per zone, so one per child here.
func TestOtherKeysAsTheBuiltInFilter(t *testing.T) {
	nodes := []*corev1.Node{virtualNode(t, "east", "east-a", 2), virtualNode(t, "west", "west-a", 2)}
	first := apart(0, zoneKey)
	require.Equal(t, []string{"east", "west"}, fits(t, first, nodes, nil))
	first.Spec.NodeName = "east"
	require.Equal(t, []string{"west"}, fits(t, apart(1, zoneKey), nodes, []*corev1.Pod{first}))
}

// spanning is the virtual node of cluster name whose subtree spans the
// groups given (so its node carries no zone label).
func spanning(t *testing.T, name string, groups ...api.Group) *corev1.Node {
	t.Helper()
	free := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
	for i := range groups {
		groups[i].Allocatable, groups[i].Free, groups[i].Shapes = free, free, []corev1.ResourceList{free}
	}
	raw, err := json.Marshal(api.Summary{Cluster: name, Covered: []string{name}, GroupKeys: api.DefaultGroupKeys,
		Groups: groups, Time: "2030-01-01T00:00:00Z"})
	require.NoError(t, err)
	return st.MakeNode().Name(name).Label(api.LabelCluster, name).Label(api.LabelNodeType, api.NodeTypeVirtualKubelet).
		Label(corev1.LabelHostname, name).Annotation(api.AnnotationSummary, string(raw)).Obj()
}

// TestAntiAffinityOverTheZonesOfChildren: replicas that may not share a
// zone, on children that span zones: east has two (three nodes), west has
// three, two of them listed in a folded key and one node whose value is
// not listed. Each child takes as many as it has zones, whatever its node
// count (the built-in filter, the virtual node lacking the zone label, let
// every replica in); a child with nodes that have no zone takes any
// number.
func TestAntiAffinityOverTheZonesOfChildren(t *testing.T) {
	east := spanning(t, "east", api.Group{Labels: map[string]string{zoneKey: "east-a"}, Nodes: 1},
		api.Group{Labels: map[string]string{zoneKey: "east-b"}, Nodes: 2})
	west := spanning(t, "west", api.Group{Labels: map[string]string{}, Nodes: 4,
		Values: map[string]map[string]int{zoneKey: {"west-a": 2, "west-b": 1}}, Others: map[string]int{zoneKey: 1}})
	nodes := []*corev1.Node{east, west}
	var bound []*corev1.Pod
	for i, want := range [][]string{{"east", "west"}, {"east", "west"}, {"west"}, {"west"}, {"west"}, nil} {
		pod := apart(i, zoneKey)
		got := fits(t, pod, nodes, bound)
		require.Equal(t, want, got, "replica %d", i)
		if len(got) > 0 {
			pod.Spec.NodeName = got[0]
			bound = append(bound, pod)
		}
	}
	intruder := st.MakePod().Namespace("ns").Name("intruder").UID("intruder").Label("app", "db").Obj()
	require.Empty(t, fits(t, intruder, nodes, bound), "their anti-affinity keeps it out of every zone")

	// Nodes without a zone below: anti-affinity on the zone holds no pod
	// off them.
	open := spanning(t, "open", api.Group{Labels: map[string]string{zoneKey: "open-a"}, Nodes: 1},
		api.Group{Labels: map[string]string{}, Nodes: 1})
	bound = nil
	for i := range 3 {
		pod := apart(i, zoneKey)
		require.Equal(t, []string{"open"}, fits(t, pod, []*corev1.Node{open}, bound), "replica %d", i)
		pod.Spec.NodeName = "open"
		bound = append(bound, pod)
	}
}

// together is a pod with required affinity on the zone to the pods of app
// "anchor", itself of app app.
func together(name, app string) *corev1.Pod {
	p := st.MakePod().Namespace("ns").Name(name).UID(name).Label("app", app).Obj()
	p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:   zoneKey,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "anchor"}},
		}},
	}}
	return p
}

// TestAffinityToAZoneInsideAChild: a pod that must share a zone with an
// anchor goes to the child the anchor runs in, though that child spans
// zones and its node has no zone label (the built-in filter refused every
// such child); to a child carrying the anchor's zone label as the built-in
// filter does; and nowhere while no anchor runs, unless it is an anchor
// itself (the first of its group).
func TestAffinityToAZoneInsideAChild(t *testing.T) {
	east := spanning(t, "east", api.Group{Labels: map[string]string{zoneKey: "east-a"}, Nodes: 1},
		api.Group{Labels: map[string]string{zoneKey: "east-b"}, Nodes: 1})
	west := spanning(t, "west", api.Group{Labels: map[string]string{zoneKey: "west-a"}, Nodes: 1},
		api.Group{Labels: map[string]string{zoneKey: "west-b"}, Nodes: 1})
	solo := virtualNode(t, "solo", "solo-a", 1)
	nodes := []*corev1.Node{east, west, solo}

	require.Empty(t, fits(t, together("follower", "follower"), nodes, nil), "no anchor runs")
	require.Equal(t, []string{"east", "solo", "west"}, fits(t, together("first", "anchor"), nodes, nil),
		"the first of a group that keeps together goes anywhere")

	anchor := st.MakePod().Namespace("ns").Name("anchor").UID("anchor").Label("app", "anchor").Node("west").Obj()
	require.Equal(t, []string{"west"}, fits(t, together("follower", "follower"), nodes, []*corev1.Pod{anchor}))
	require.Equal(t, []string{"west"}, fits(t, together("second", "anchor"), nodes, []*corev1.Pod{anchor}),
		"a second anchor joins the first")

	anchor.Spec.NodeName = "solo"
	require.Equal(t, []string{"solo"}, fits(t, together("follower", "follower"), nodes, []*corev1.Pod{anchor}),
		"a child with the zone's label, as the built-in filter judges it")
}
