package child

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
)

// A label key is carried below when a node here has it, or a child's
// summary has it in a group, listed or folded.
func TestCarriedBelow(t *testing.T) {
	summary, err := api.FormatSummary(api.Summary{GroupKeys: []string{"zone", "rack"}, Groups: []api.Group{
		{Labels: map[string]string{"zone": "a"}, Nodes: 1},
		{Values: map[string]map[string]int{"rack": {"r1": 2}}, Nodes: 2},
	}})
	require.NoError(t, err)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "real", Labels: map[string]string{"disk": "ssd"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "child", Annotations: map[string]string{api.AnnotationSummary: summary}}},
	} {
		require.NoError(t, indexer.Add(n))
	}
	carried := carriedBelow(corelisters.NewNodeLister(indexer))
	for key, want := range map[string]bool{"disk": true, "zone": true, "rack": true, "team": false} {
		require.Equal(t, want, carried(key), key)
	}
}

// A resource is below when some node here has it, a child's virtual node
// (its subtree's) included.
func TestResourceBelow(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "real"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "child"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"example.com/fpga": resource.MustParse("2")}}},
	} {
		require.NoError(t, indexer.Add(n))
	}
	below := resourceBelow(corelisters.NewNodeLister(indexer))
	for r, want := range map[corev1.ResourceName]bool{"nvidia.com/gpu": true, "example.com/fpga": true, "example.com/licence": false} {
		require.Equal(t, want, below(r), r)
	}
}

// The labels of the node's last version are kept, decorated or not.
func TestParentViewNodeLabels(t *testing.T) {
	v := newParentView(nil, nil)
	require.Nil(t, v.nodeLabels())
	require.Nil(t, v.nodeTaints())
	relaxed := []corev1.Taint{{Key: api.TaintKeyProvider, Value: api.TaintValueProvider, Effect: corev1.TaintEffectPreferNoSchedule}}
	alloc := corev1.ResourceList{"example.com/licence": resource.MustParse("5")}
	v.observe(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "blue"}},
		Spec: corev1.NodeSpec{Taints: relaxed}, Status: corev1.NodeStatus{Allocatable: alloc}})
	require.Equal(t, alloc, v.nodeAllocatable())
	require.Equal(t, map[string]string{"team": "blue"}, v.nodeLabels())
	require.Equal(t, relaxed, v.nodeTaints())
}
