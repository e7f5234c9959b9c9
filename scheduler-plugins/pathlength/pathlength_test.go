package pathlength

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/nestlet/nestlet/api"
)

const region = "topology.kubernetes.io/region"

// virtualNode is the virtual node of cluster, whose summary holds one group
// per region at the given depth.
func virtualNode(t *testing.T, cluster string, depthByRegion map[string]int) *corev1.Node {
	t.Helper()
	s := api.Summary{Cluster: cluster, Covered: []string{cluster}}
	for r, d := range depthByRegion {
		s.Groups = append(s.Groups, api.Group{Labels: map[string]string{region: r}, Nodes: 1, Depth: d})
		s.Depth = max(s.Depth, d)
	}
	raw, err := api.FormatSummary(s)
	require.NoError(t, err)
	return st.MakeNode().Name(cluster).Label(api.LabelCluster, cluster).Annotation(api.AnnotationSummary, raw).Obj()
}

// scores runs Score and NormalizeScore over nodes for pod, by node name.
func scores(t *testing.T, pod *corev1.Pod, nodes ...*corev1.Node) map[string]int64 {
	t.Helper()
	pl := &PathLength{}
	var list fwk.NodeScoreList
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		s, status := pl.Score(context.Background(), nil, pod, ni)
		require.True(t, status.IsSuccess())
		list = append(list, fwk.NodeScore{Name: n.Name, Score: s})
	}
	require.True(t, pl.NormalizeScore(context.Background(), nil, pod, list).IsSuccess())
	out := map[string]int64{}
	for _, s := range list {
		out[s.Name] = s.Score
	}
	return out
}

func TestPathLength(t *testing.T) {
	west := st.MakePod().Name("p").NodeSelector(map[string]string{region: "west"}).Obj()
	anyPod := st.MakePod().Name("q").Obj()
	realNode := st.MakeNode().Name("local").Obj()
	// At east, in a diamond: west-1 is a direct child with west nodes of
	// its own; the root (a parent that also joined east as a child)
	// reaches west two levels further down.
	westOne := virtualNode(t, "west-1", map[string]int{"west": 0})
	viaRoot := virtualNode(t, "root", map[string]int{"west": 2, "north": 0})
	tests := []struct {
		name  string
		pod   *corev1.Pod
		nodes []*corev1.Node
		want  map[string]int64
	}{
		{name: "the direct child wins over the longer path", pod: west, nodes: []*corev1.Node{westOne, viaRoot},
			want: map[string]int64{"west-1": fwk.MaxNodeScore, "root": 0}},
		{name: "depth of the groups the pod may use, not of the whole subtree: root reaches north at once", pod: anyPod,
			nodes: []*corev1.Node{westOne, viaRoot}, want: map[string]int64{"west-1": fwk.MaxNodeScore, "root": fwk.MaxNodeScore}},
		{name: "children equally far: no preference (spread decides)", pod: anyPod,
			nodes: []*corev1.Node{virtualNode(t, "east", map[string]int{"east": 1}), virtualNode(t, "west", map[string]int{"west": 1})},
			want:  map[string]int64{"east": fwk.MaxNodeScore, "west": fwk.MaxNodeScore}},
		{name: "real nodes are not ranked", pod: anyPod,
			nodes: []*corev1.Node{realNode, virtualNode(t, "near", map[string]int{"a": 0}), virtualNode(t, "mid", map[string]int{"a": 1}), virtualNode(t, "far", map[string]int{"a": 2})},
			want:  map[string]int64{"local": fwk.MaxNodeScore, "near": fwk.MaxNodeScore, "mid": fwk.MaxNodeScore / 2, "far": 0}},
		{name: "a virtual node without a summary counts as one hop", pod: anyPod,
			nodes: []*corev1.Node{st.MakeNode().Name("new").Label(api.LabelCluster, "new").Obj(), virtualNode(t, "deep", map[string]int{"a": 3})},
			want:  map[string]int64{"new": fwk.MaxNodeScore, "deep": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, scores(t, tt.pod, tt.nodes...))
		})
	}
}
