package summary

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A cluster that gives its parent at most 2 CPU and 3 pods shows it no
// more: the virtual node's allocatable and its groups' at the limit, and
// what is free at what the limit leaves beside the parent's own pods
// (another parent's do not count against it).
func TestLimitsCapWhatTheParentSees(t *testing.T) {
	nodes := []*corev1.Node{
		newNode("a", rl("cpu", "4", "memory", "8Gi", "pods", "110"), withLabels("topology.kubernetes.io/region", "west")),
		newNode("b", rl("cpu", "4", "memory", "8Gi", "pods", "110"), withLabels("topology.kubernetes.io/region", "west")),
	}
	pods := []*corev1.Pod{
		newPod("ours", "a", rl("cpu", "500m"), withOrigin("p/0001")),
		newPod("theirs", "b", rl("cpu", "1"), withOrigin("q/0002")),
	}
	r := Compute(Input{Cluster: "west-1", Parent: "p", Nodes: nodes, Pods: pods, Now: time.Now(),
		Limits: rl("cpu", "2", "pods", "3")})
	q := func(l corev1.ResourceList, name corev1.ResourceName) string {
		v := l[name]
		return v.String()
	}
	require.Equal(t, "2", q(r.Allocatable, corev1.ResourceCPU), "the node shows at most the limit")
	require.Equal(t, "3", q(r.Allocatable, corev1.ResourcePods))
	require.Equal(t, "16Gi", q(r.Allocatable, corev1.ResourceMemory), "a resource without a limit is as it was")
	require.Len(t, r.Summary.Groups, 1)
	g := r.Summary.Groups[0]
	require.Equal(t, "2", q(g.Allocatable, corev1.ResourceCPU))
	require.Equal(t, "1500m", q(g.Free, corev1.ResourceCPU), "the limit less the parent's own 500m")
	require.Equal(t, "2", q(g.Free, corev1.ResourcePods), "3 pods less its one")
	for _, s := range g.Shapes {
		c := s[corev1.ResourceCPU]
		require.LessOrEqual(t, c.Cmp(resource.MustParse("1500m")), 0, "no single node shows more than is left: %v", s)
	}

	unlimited := Compute(Input{Cluster: "west-1", Parent: "p", Nodes: nodes, Pods: pods, Now: time.Now()})
	require.Equal(t, "7", q(unlimited.Allocatable, corev1.ResourceCPU), "without limits: 8 less the other parent's 1")
}
