package treespread

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/schedtest"
)

const zoneKey = "topology.kubernetes.io/zone"

// handle is the part of fwk.Handle the plugin uses.
type handle struct {
	fwk.Handle
	nodes  []fwk.NodeInfo
	client kubernetes.Interface
}

func (h *handle) SnapshotSharedLister() fwk.SharedLister { return lister(h.nodes) }
func (h *handle) ClientSet() kubernetes.Interface        { return h.client }
func (h *handle) APICacher() fwk.APICacher               { return nil }

type lister []fwk.NodeInfo

func (l lister) NodeInfos() fwk.NodeInfoLister { return l }
func (l lister) StorageInfos() fwk.StorageInfoLister {
	return nil
}
func (l lister) List() ([]fwk.NodeInfo, error) { return l, nil }
func (l lister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l lister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return nil, nil
}
func (l lister) Get(name string) (fwk.NodeInfo, error) {
	for _, ni := range l {
		if ni.Node().Name == name {
			return ni, nil
		}
	}
	return nil, fmt.Errorf("node %s not found", name)
}

func group(zone string, nodes int) api.Group {
	free := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
	return api.Group{Labels: map[string]string{zoneKey: zone}, Nodes: nodes, Allocatable: free, Free: free,
		Shapes: []corev1.ResourceList{free}}
}

// virtualNode is the virtual node of cluster name, whose subtree holds the
// zones given, a node in each.
func virtualNode(t *testing.T, name string, zones ...string) *framework.NodeInfo {
	t.Helper()
	var groups []api.Group
	for _, z := range zones {
		groups = append(groups, group(z, 1))
	}
	return virtualNodeWith(t, name, groups...)
}

// virtualNodeWith is the virtual node of cluster name whose summary has
// the groups given.
func virtualNodeWith(t *testing.T, name string, groups ...api.Group) *framework.NodeInfo {
	t.Helper()
	raw, err := json.Marshal(api.Summary{Cluster: name, Covered: []string{name}, GroupKeys: api.DefaultGroupKeys,
		Groups: groups, Time: "2030-01-01T00:00:00Z"})
	require.NoError(t, err)
	n := st.MakeNode().Name(name).Label(api.LabelCluster, name).Label(api.LabelNodeType, api.NodeTypeVirtualKubelet).
		Label(corev1.LabelHostname, name).Annotation(api.AnnotationSummary, string(raw)).Obj()
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	return ni
}

func realNode(name, zone string) *framework.NodeInfo {
	w := st.MakeNode().Name(name).Label(corev1.LabelHostname, name)
	if zone != "" {
		w = w.Label(zoneKey, zone)
	}
	ni := framework.NewNodeInfo()
	ni.SetNode(w.Obj())
	return ni
}

// spreadPod is replica i of an app spread over zones with maxSkew 1.
func spreadPod(i int, when corev1.UnsatisfiableConstraintAction) *corev1.Pod {
	p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("web-%d", i)).UID(fmt.Sprintf("uid-%d", i)).Label("app", "web").Obj()
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}}
	return p
}

func newPlugin(t *testing.T, nodes []fwk.NodeInfo, client kubernetes.Interface) *TreeSpread {
	t.Helper()
	p, err := New(context.Background(), nil, &handle{nodes: nodes, client: client})
	require.NoError(t, err)
	require.Equal(t, Name, p.Name())
	return p.(*TreeSpread)
}

// feasible runs PreFilter and Filter as the scheduler does and returns the
// nodes that fit pod, in the order given.
func feasible(t *testing.T, pl *TreeSpread, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) []string {
	t.Helper()
	_, status := pl.PreFilter(context.Background(), state, pod, nodes)
	require.True(t, status.IsSuccess(), status.Message())
	var out []string
	for _, ni := range nodes {
		s := pl.Filter(context.Background(), state, pod, ni)
		schedtest.RequireCleanFailure(t, pod, s)
		if s.IsSuccess() {
			out = append(out, ni.Node().Name)
		}
	}
	return out
}

// TestSpreadOverZonesInsideChildren: eight replicas spread with maxSkew 1
// over four zones, two inside each of two children, always offered to the
// first child first: the filter and the domains chosen at binding put two
// in every zone, where a level that saw each child as one domain (or not
// at all, lacking the zone label) could not.
func TestSpreadOverZonesInsideChildren(t *testing.T) {
	east, west := virtualNode(t, "east", "east-a", "east-b"), virtualNode(t, "west", "west-a", "west-b")
	nodes := []fwk.NodeInfo{east, west}
	client := fake.NewClientset()
	var bound []map[string]string
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if b, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding); ok {
			bound = append(bound, api.Domains(&corev1.Pod{ObjectMeta: b.ObjectMeta}))
			return true, b, nil
		}
		return false, nil, nil
	})
	pl := newPlugin(t, nodes, client)
	zones := map[string]int{}
	for i := range 8 {
		pod := spreadPod(i, corev1.DoNotSchedule)
		state := framework.NewCycleState()
		fits := feasible(t, pl, state, pod, nodes)
		require.NotEmpty(t, fits, "replica %d fits nowhere", i)
		node := fits[0]
		require.True(t, pl.Reserve(context.Background(), state, pod, node).IsSuccess())
		require.True(t, pl.Bind(context.Background(), state, pod, node).IsSuccess())
		require.Len(t, bound, i+1)
		zone := bound[i][zoneKey]
		require.NotEmpty(t, zone, "replica %d bound to %s without a zone", i, node)
		zones[zone]++
		// The binding as the informer then shows it: bound, annotated.
		pod.Spec.NodeName = node
		pod.Annotations = map[string]string{api.AnnotationDomains: api.FormatDomains(bound[i])}
		for _, ni := range nodes {
			if ni.Node().Name == node {
				ni.(*framework.NodeInfo).AddPod(pod)
			}
		}
	}
	require.Equal(t, map[string]int{"east-a": 2, "east-b": 2, "west-a": 2, "west-b": 2}, zones)
}

// TestReservedDomainsCount: a pod reserved on a virtual node counts in the
// domain chosen for it before its binding is seen, and no longer once
// unreserved.
func TestReservedDomainsCount(t *testing.T) {
	east := virtualNode(t, "east", "east-a", "east-b")
	nodes := []fwk.NodeInfo{east}
	pl := newPlugin(t, nodes, fake.NewClientset())
	first := spreadPod(0, corev1.DoNotSchedule)
	state := framework.NewCycleState()
	require.Equal(t, []string{"east"}, feasible(t, pl, state, first, nodes))
	require.True(t, pl.Reserve(context.Background(), state, first, "east").IsSuccess())
	assumed := first.DeepCopy()
	assumed.Spec.NodeName = "east"
	east.AddPod(assumed) // assumed: bound in the cache, not annotated yet

	second := spreadPod(1, corev1.DoNotSchedule)
	state = framework.NewCycleState()
	require.Equal(t, []string{"east"}, feasible(t, pl, state, second, nodes))
	s, err := readState(state)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"east-a": 1, "east-b": 0}, s.counts[0])

	pl.Unreserve(context.Background(), state, first, "east")
	state = framework.NewCycleState()
	feasible(t, pl, state, second, nodes)
	s, err = readState(state)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"east-a": 0, "east-b": 0}, s.counts[0])
}

// TestRealNodesAsTheBuiltInFilter: real nodes are judged by their label;
// one without the key is refused for good; minDomains above the domains
// seen makes the least count 0; a constraint only scored is not filtered.
func TestRealNodesAsTheBuiltInFilter(t *testing.T) {
	a, b, bare := realNode("n-a", "a"), realNode("n-b", "b"), realNode("n-bare", "")
	nodes := []fwk.NodeInfo{a, b, bare}
	pl := newPlugin(t, nodes, fake.NewClientset())
	add := func(ni *framework.NodeInfo, i int) {
		p := spreadPod(100+i, corev1.DoNotSchedule)
		p.Spec.NodeName = ni.Node().Name
		ni.AddPod(p)
	}

	pod := spreadPod(1, corev1.DoNotSchedule)
	state := framework.NewCycleState()
	require.Equal(t, []string{"n-a", "n-b"}, feasible(t, pl, state, pod, nodes))
	require.Equal(t, fwk.UnschedulableAndUnresolvable, pl.Filter(context.Background(), state, pod, bare).Code())

	// One in a: a second there would make a skew of 2.
	add(a, 0)
	state = framework.NewCycleState()
	require.Equal(t, []string{"n-b"}, feasible(t, pl, state, pod, nodes))
	require.Equal(t, ErrReasonConstraintsNotMatch, pl.Filter(context.Background(), state, pod, a).Message())

	// One in each: both fit; with minDomains 3 over two domains the least
	// count is 0, so neither does.
	add(b, 1)
	state = framework.NewCycleState()
	require.Equal(t, []string{"n-a", "n-b"}, feasible(t, pl, state, pod, nodes))
	pod.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](3)
	state = framework.NewCycleState()
	require.Empty(t, feasible(t, pl, state, pod, nodes))

	// ScheduleAnyway only: nothing to filter, but the counts are there
	// for Reserve.
	add(a, 2)
	soft := spreadPod(2, corev1.ScheduleAnyway)
	state = framework.NewCycleState()
	_, status := pl.PreFilter(context.Background(), state, soft, nodes)
	require.Equal(t, fwk.Skip, status.Code())
	s, err := readState(state)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"a": 2, "b": 1}, s.counts[0])

	// No constraint: skipped.
	_, status = pl.PreFilter(context.Background(), framework.NewCycleState(), st.MakePod().Obj(), nodes)
	require.Equal(t, fwk.Skip, status.Code())
}

// TestDomainsOutsideTheNodeAffinity: with the default nodeAffinityPolicy
// (Honor), a zone the pod's nodeSelector excludes is no domain, so it
// does not hold the least count down.
func TestDomainsOutsideTheNodeAffinity(t *testing.T) {
	east, west := virtualNode(t, "east", "east-a", "east-b"), virtualNode(t, "west", "west-a")
	nodes := []fwk.NodeInfo{east, west}
	pl := newPlugin(t, nodes, fake.NewClientset())
	for i, zone := range []string{"east-a", "east-b"} {
		p := spreadPod(100+i, corev1.DoNotSchedule)
		p.Spec.NodeName = "east"
		p.Annotations = map[string]string{api.AnnotationDomains: api.FormatDomains(map[string]string{zoneKey: zone})}
		east.AddPod(p)
	}
	pod := spreadPod(1, corev1.DoNotSchedule)
	pod.Spec.NodeSelector = map[string]string{zoneKey + "-group": "x"} // matches no group: nothing fits
	state := framework.NewCycleState()
	require.Empty(t, feasible(t, pl, state, pod, nodes))

	pod.Spec.NodeSelector = nil
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"east-a", "east-b"}}}}}}}}
	state = framework.NewCycleState()
	// west-a (0 pods) is excluded: the least count is 1, so east fits.
	require.Equal(t, []string{"east"}, feasible(t, pl, state, pod, nodes))

	// Ignore: west-a counts, 1 + 1 - 0 > 1 in either east zone.
	pod.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
	state = framework.NewCycleState()
	require.Empty(t, feasible(t, pl, state, pod, nodes))
}

// TestScheduleAnywayChoosesTheLeastLoaded: a pod spread only with
// ScheduleAnyway is not filtered, but bound to a virtual node it is sent to
// the zone inside it holding the fewest matching pods.
func TestScheduleAnywayChoosesTheLeastLoaded(t *testing.T) {
	east := virtualNode(t, "east", "east-a", "east-b")
	nodes := []fwk.NodeInfo{east}
	pl := newPlugin(t, nodes, fake.NewClientset())
	for i := range 2 {
		p := spreadPod(100+i, corev1.ScheduleAnyway)
		p.Spec.NodeName = "east"
		p.Annotations = map[string]string{api.AnnotationDomains: api.FormatDomains(map[string]string{zoneKey: "east-a"})}
		east.AddPod(p)
	}
	pod := spreadPod(1, corev1.ScheduleAnyway)
	state := framework.NewCycleState()
	_, status := pl.PreFilter(context.Background(), state, pod, nodes)
	require.Equal(t, fwk.Skip, status.Code())
	require.True(t, pl.Reserve(context.Background(), state, pod, "east").IsSuccess())
	require.Equal(t, map[string]string{zoneKey: "east-b"}, pl.domainsOf(pod))
}

// TestPreemptionWhatIfs: preemption asks what removing a victim (or adding
// a nominated pod) changes, on a copy of the cycle's state. Zone east-a
// (inside the child east) holds two replicas and west-a (a real node) one:
// east, offering only east-a, does not fit the next one (skew 2). Without
// one of east-a's replicas it does; with one more in west-a it does too;
// the state the copies came from is left as it was.
func TestPreemptionWhatIfs(t *testing.T) {
	east, west := virtualNode(t, "east", "east-a"), realNode("west-1", "west-a")
	nodes := []fwk.NodeInfo{east, west}
	var inEast []*corev1.Pod
	for i := range 2 {
		p := spreadPod(10+i, corev1.DoNotSchedule)
		p.Spec.NodeName = "east"
		p.Annotations = map[string]string{api.AnnotationDomains: api.FormatDomains(map[string]string{zoneKey: "east-a"})}
		east.AddPod(p)
		inEast = append(inEast, p)
	}
	inWest := spreadPod(20, corev1.DoNotSchedule)
	inWest.Spec.NodeName = "west-1"
	west.AddPod(inWest)
	pl := newPlugin(t, nodes, fake.NewClientset())
	ext := pl.PreFilterExtensions()
	require.NotNil(t, ext)
	pod := spreadPod(0, corev1.DoNotSchedule)
	state := framework.NewCycleState()
	require.Equal(t, []string{"west-1"}, feasible(t, pl, state, pod, nodes))
	fitsEast := func(state fwk.CycleState) bool { return pl.Filter(context.Background(), state, pod, east).IsSuccess() }

	without := state.Clone()
	victim, err := framework.NewPodInfo(inEast[0])
	require.NoError(t, err)
	require.True(t, ext.RemovePod(context.Background(), without, pod, victim, east).IsSuccess())
	require.True(t, fitsEast(without), "east fits once one of east-a's replicas is gone")

	with := state.Clone()
	nominated, err := framework.NewPodInfo(spreadPod(21, corev1.DoNotSchedule))
	require.NoError(t, err)
	require.True(t, ext.AddPod(context.Background(), with, pod, nominated, west).IsSuccess())
	require.True(t, fitsEast(with), "east fits once west-a holds two")

	other, err := framework.NewPodInfo(st.MakePod().Namespace("other").Name("web-x").Label("app", "web").Obj())
	require.NoError(t, err)
	elsewhere := state.Clone()
	require.True(t, ext.AddPod(context.Background(), elsewhere, pod, other, west).IsSuccess())
	require.False(t, fitsEast(elsewhere), "a pod of another namespace counts for nothing")
	require.False(t, fitsEast(state), "the original state is unchanged")
}

// hostSpreadPod is replica i of an app spread over nodes with maxSkew 1,
// counting only the nodes whose taints it tolerates.
func hostSpreadPod(i int) *corev1.Pod {
	p := spreadPod(i, corev1.DoNotSchedule)
	p.Spec.TopologySpreadConstraints[0].TopologyKey = corev1.LabelHostname
	p.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
	return p
}

// TestSpreadOverHostsOfUnequalChildren: ten replicas spread with
// maxSkew 1 over the hostname, east holding three nodes, west one, and a
// real node beside them; east always offered first. Each node of the tree
// is a domain: east gets three times west's share (what its child then
// spreads over its three nodes), where seeing each child as one host would
// give each child the same and put three replicas on west's one node. A
// lost child (its virtual node tainted unreachable) is no domain for
// nodeTaintsPolicy Honor, else its empty nodes would hold every other
// node to one replica.
func TestSpreadOverHostsOfUnequalChildren(t *testing.T) {
	east, west, real := virtualNodeWith(t, "east", group("east-a", 3)), virtualNodeWith(t, "west", group("west-a", 1)), realNode("root-1", "")
	lost := virtualNodeWith(t, "lost", group("lost-a", 2))
	lostNode := lost.Node().DeepCopy()
	lostNode.Spec.Taints = []corev1.Taint{{Key: api.TaintKeyProvider, Value: "nestlet", Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}}
	lost.SetNode(lostNode)
	nodes := []fwk.NodeInfo{east, west, real, lost}
	pl := newPlugin(t, nodes, fake.NewClientset())
	placed := map[string]int{}
	for i := range 10 {
		pod := hostSpreadPod(i)
		state := framework.NewCycleState()
		fits := feasible(t, pl, state, pod, nodes)
		require.NotEmpty(t, fits, "replica %d fits nowhere", i)
		node := fits[0]
		require.True(t, pl.Reserve(context.Background(), state, pod, node).IsSuccess())
		pl.mu.Lock()
		_, written := pl.chosen[pod.UID]
		pl.mu.Unlock()
		require.False(t, written, "a node inside a child is the child's to choose: nothing is written on the binding")
		pod.Spec.NodeName = node
		for _, ni := range nodes {
			if ni.Node().Name == node {
				ni.(*framework.NodeInfo).AddPod(pod)
			}
		}
		placed[node]++
	}
	require.Equal(t, map[string]int{"east": 6, "west": 2, "root-1": 2}, placed)

	// Without east's replicas but one, east's three hosts hold 1, 0, 0:
	// the next replica may go only there.
	state := framework.NewCycleState()
	pod := hostSpreadPod(99)
	feasible(t, pl, state, pod, nodes)
	for _, p := range east.GetPods()[1:] {
		require.True(t, pl.RemovePod(context.Background(), state, pod, p, east).IsSuccess())
	}
	require.True(t, pl.Filter(context.Background(), state, pod, east).IsSuccess())
	require.False(t, pl.Filter(context.Background(), state, pod, west).IsSuccess())
	require.False(t, pl.Filter(context.Background(), state, pod, real).IsSuccess())
}
