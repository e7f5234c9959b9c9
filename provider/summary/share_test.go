package summary

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

// report is what cluster reports to parent with share percent, as the
// virtual node the parent then holds.
func report(t *testing.T, cluster, parent string, share int, nodes []*corev1.Node, pods ...*corev1.Pod) *corev1.Node {
	t.Helper()
	r := Compute(Input{Cluster: cluster, Parent: parent, Nodes: nodes, Pods: pods, SharePercent: share})
	return newNode(cluster, r.Allocatable, virtualOf(t, r.Summary))
}

// freeCPU sums the free CPU of a summary's groups, in millicores.
func freeCPU(s api.Summary) int64 {
	var m int64
	for _, g := range s.Groups {
		q := g.Free[corev1.ResourceCPU]
		m += q.MilliValue()
	}
	return m
}

func TestShareOfFreeCapacity(t *testing.T) {
	nodes := []*corev1.Node{newNode("a", rl("cpu", "8", "memory", "16Gi", "pods", "110"))}
	pods := []*corev1.Pod{
		newPod("mine", "a", rl("cpu", "2"), withOrigin("p/uid-1")), // sent by the parent p
		newPod("local", "a", rl("cpu", "2")),                       // this cluster's own
	}
	full := Compute(Input{Cluster: "c", Parent: "p", Nodes: nodes, Pods: pods})
	half := Compute(Input{Cluster: "c", Parent: "p", Nodes: nodes, Pods: pods, SharePercent: 50})
	require.Zero(t, full.Summary.SharePercent)
	require.Equal(t, 50, half.Summary.SharePercent)
	q := full.Allocatable[corev1.ResourceCPU]
	require.Equal(t, int64(6000), q.MilliValue(), "all: 8 - 2 not sent by p")
	q = half.Allocatable[corev1.ResourceCPU]
	require.Equal(t, int64(2000+2000), q.MilliValue(), "p's own 2 + half of the 4 free")
	require.Equal(t, int64(4000), freeCPU(full.Summary))
	require.Equal(t, int64(2000), freeCPU(half.Summary))
	require.Equal(t, full.Summary.Groups[0].Shapes, half.Summary.Groups[0].Shapes, "shapes are per node: not scaled")
	require.Equal(t, full.Summary.Groups[0].Nodes, half.Summary.Groups[0].Nodes)
}

// A leaf with two parents under one root (a diamond) is counted once at
// the root: each parent gets half its free capacity.
func TestDiamondCountedOnce(t *testing.T) {
	leafNodes := []*corev1.Node{newNode("l-1", rl("cpu", "8")), newNode("l-2", rl("cpu", "4"))}
	leafPods := []*corev1.Pod{newPod("x", "l-1", rl("cpu", "3"))}
	east := report(t, "east", "root", 0, []*corev1.Node{report(t, "leaf", "east", 50, leafNodes, leafPods...)})
	west := report(t, "west", "root", 0, []*corev1.Node{report(t, "leaf", "west", 50, leafNodes, leafPods...)})
	root := Compute(Input{Cluster: "root", Nodes: []*corev1.Node{east, west}})
	require.Equal(t, int64(12000-3000), freeCPU(root.Summary), "the root sees the leaf's free CPU once")
	require.Equal(t, []string{"east", "leaf", "root", "west"}, root.Summary.Covered)
}

// In a 4-level DAG (r <- x, y; x <- l1, l2; y <- l2, l3; l2 shared), the
// root's free capacity is the sum of the distinct leaves', whatever the
// order of the merge.
func TestDAGCountedOnce(t *testing.T) {
	leaf := func(name, cpu string) []*corev1.Node { return []*corev1.Node{newNode(name+"-n", rl("cpu", cpu))} }
	x := report(t, "x", "r", 0, []*corev1.Node{report(t, "l1", "x", 0, leaf("l1", "2")), report(t, "l2", "x", 50, leaf("l2", "10"))})
	y := report(t, "y", "r", 0, []*corev1.Node{report(t, "l2", "y", 50, leaf("l2", "10")), report(t, "l3", "y", 0, leaf("l3", "6"))})
	mid := report(t, "m", "r", 0, []*corev1.Node{x, y}) // one more level above both
	for _, nodes := range [][]*corev1.Node{{x, y}, {y, x}} {
		root := Compute(Input{Cluster: "r", Nodes: nodes})
		require.Equal(t, int64(18000), freeCPU(root.Summary))
	}
	top := Compute(Input{Cluster: "top", Nodes: []*corev1.Node{mid}})
	require.Equal(t, int64(18000), freeCPU(top.Summary), "one level higher, the same")
}

// A cycle (a and b joined each other) is cut by split horizon: what b
// reports to a leaves out a's own virtual node.
func TestCycleCountedOnce(t *testing.T) {
	aNodes := []*corev1.Node{newNode("a-n", rl("cpu", "4"))}
	bNodes := []*corev1.Node{newNode("b-n", rl("cpu", "2"))}
	aInB := report(t, "a", "b", 0, aNodes) // a as b's child (a has no child yet)
	bInA := report(t, "b", "a", 0, append(bNodes, aInB))
	require.Equal(t, int64(2000), freeCPU(Compute(Input{Cluster: "a", Nodes: []*corev1.Node{bInA}}).Summary), "a sees b's own nodes, not itself through b")
}
