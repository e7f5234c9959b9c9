package child

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
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

// The labels of the node's last version are kept, decorated or not.
func TestParentViewNodeLabels(t *testing.T) {
	v := newParentView(nil, nil)
	require.Nil(t, v.nodeLabels())
	v.observe(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "blue"}}})
	require.Equal(t, map[string]string{"team": "blue"}, v.nodeLabels())
}
