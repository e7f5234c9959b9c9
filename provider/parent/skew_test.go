package parent

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/version"
)

// The parent taints the node of a child whose protocols do not meet its
// own, names both builds, and lifts the taint once they meet again; a
// child cannot ask for that taint itself. A child from before protocols
// were stated is read as protocol 1.
func TestDecoratorVersionSkew(t *testing.T) {
	child := func(annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Labels: map[string]string{api.LabelCluster: "child"}, Annotations: annotations},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{providerTaint}}}
	}
	sync := func(n *corev1.Node) *corev1.Node {
		t.Helper()
		client := fake.NewClientset(n)
		indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		require.NoError(t, indexer.Add(n))
		d := &decorator{client: client, nodes: corelisters.NewNodeLister(indexer), grants: poolGrants(corelisters.NewNodeLister(indexer), nil, "0.0.0.0/0", "::/0")}
		_, err := d.sync(t.Context(), "child")
		require.NoError(t, err)
		out, err := client.CoreV1().Nodes().Get(t.Context(), "child", metav1.GetOptions{})
		require.NoError(t, err)
		return out
	}
	skewTainted := func(n *corev1.Node) bool {
		for _, tt := range n.Spec.Taints {
			if tt.Key == api.TaintKeyVersionSkew {
				return true
			}
		}
		return false
	}

	future := sync(child(map[string]string{api.AnnotationProtocols: "7-9", api.AnnotationAgentVersion: "9.0.0 (abc)"}))
	require.True(t, skewTainted(future), "a child speaking only protocols 7-9: %v", future.Spec.Taints)
	require.Equal(t, version.String(), future.Annotations[api.AnnotationParentVersion])
	require.Equal(t, api.OwnProtocols().String(), future.Annotations[api.AnnotationParentProtocols])
	require.Contains(t, versionSkew(future), "runs Nestlet 9.0.0 (abc) (protocols 7-9), this cluster "+version.String())

	// Upgraded to meet ours: the taint goes.
	future.Annotations[api.AnnotationProtocols] = api.OwnProtocols().String()
	require.False(t, skewTainted(sync(future)))

	// From before: protocol 1, no taint.
	require.False(t, skewTainted(sync(child(nil))))
	// Unreadable: tainted.
	require.True(t, skewTainted(sync(child(map[string]string{api.AnnotationProtocols: "latest"}))))
	// Asked for by the child while nothing is skewed: not applied.
	asked := sync(child(map[string]string{api.AnnotationDesiredTaints: `[{"key":"nestlet.io/version-skew","effect":"NoSchedule"}]`}))
	require.False(t, skewTainted(asked), "%v", asked.Spec.Taints)
}
