package namespacepolicy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
)

func nodeInfo(node *corev1.Node) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	return ni
}

func TestFilter(t *testing.T) {
	east := st.MakeNode().Name("east").Label(api.LabelCluster, "east").Label(corev1.LabelTopologyRegion, "east").Obj()
	west := st.MakeNode().Name("west").Label(api.LabelCluster, "west").Label(corev1.LabelTopologyRegion, "west").Obj()
	real := st.MakeNode().Name("node-1").Label(corev1.LabelTopologyRegion, "west").Obj()
	namespaces := map[string]string{"prod": "topology.kubernetes.io/region=east", "local": api.NamespaceClustersNone,
		"broken": "region in (east", "free": "", "opened": "nestlet.io/cluster=west"}
	tests := []struct {
		name, namespace string
		node            *corev1.Node
		want            string // part of the reason; "" passes
		skipped         bool
	}{
		{name: "matching child", namespace: "prod", node: east},
		{name: "other child", namespace: "prod", node: west, want: "only to clusters matching topology.kubernetes.io/region=east"},
		{name: "real nodes always pass", namespace: "prod", node: real},
		{name: "none", namespace: "local", node: east, want: "keeps its pods in this cluster"},
		{name: "a selector that does not parse fails closed", namespace: "broken", node: east, want: "is not a label selector"},
		{name: "no annotation: anywhere", namespace: "default", node: west, skipped: true},
		{name: "an empty selector: anywhere", namespace: "free", node: west},
		{name: "a system namespace stays", namespace: "kube-system", node: east, want: "is a system namespace"},
		{name: "a selector on the cluster's name", namespace: "opened", node: west},
		{name: "a namespace not yet seen is judged by its name", namespace: "nestlet-system", node: east, want: "is a system namespace"},
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, sel := range namespaces {
		require.NoError(t, indexer.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{api.AnnotationNamespaceClusters: sel}}}))
	}
	require.NoError(t, indexer.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}))
	require.NoError(t, indexer.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}))
	pl := NewWithLister(corelisters.NewNamespaceLister(indexer), "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := st.MakePod().Name("p").Namespace(tt.namespace).Obj()
			state := framework.NewCycleState()
			_, s := pl.PreFilter(context.Background(), state, pod, nil)
			if tt.skipped {
				require.Equal(t, fwk.Skip, s.Code())
				return
			}
			require.True(t, s.IsSuccess(), "%v", s)
			got := pl.Filter(context.Background(), state, pod, nodeInfo(tt.node))
			if tt.want == "" {
				require.True(t, got.IsSuccess(), "%v", got)
				return
			}
			require.Equal(t, fwk.UnschedulableAndUnresolvable, got.Code())
			require.Contains(t, got.Message(), tt.want)
			require.Contains(t, got.Message(), tt.node.Name+": ", "the reason names the node")
		})
	}
}

// A system namespace an operator opens with the annotation takes it.
func TestSystemNamespaceOpened(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Annotations: map[string]string{api.AnnotationNamespaceClusters: "nestlet.io/cluster=east"}}}
	p := policyOf(ns, "")
	require.NotNil(t, p)
	require.Empty(t, p.refused)
	require.Equal(t, "nestlet.io/cluster=east", p.selector.String())
}

// With defaultClusters "none", a namespace without the annotation keeps
// its pods (it must opt in); with a selector, that selector applies to it.
func TestDefaultClusters(t *testing.T) {
	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	p := policyOf(plain, api.NamespaceClustersNone)
	require.NotNil(t, p)
	require.Contains(t, p.refused, "has not opted in")
	p = policyOf(plain, "topology.kubernetes.io/region=east")
	require.NotNil(t, p)
	require.Equal(t, "topology.kubernetes.io/region=east", p.selector.String())
	opted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "opted", Annotations: map[string]string{api.AnnotationNamespaceClusters: ""}}}
	p = policyOf(opted, api.NamespaceClustersNone)
	require.NotNil(t, p)
	require.Empty(t, p.refused, "an opted-in namespace with an empty selector goes anywhere")
	require.True(t, p.selector.Empty())

	_, err := New(context.Background(), &config.NamespacePolicyArgs{DefaultClusters: "region in (east"}, nil)
	require.ErrorContains(t, err, "defaultClusters")
}
