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
