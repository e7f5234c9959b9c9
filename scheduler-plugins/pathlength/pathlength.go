// Package pathlength is the PathLength scheduler plugin: among the virtual
// nodes a pod may go to, it prefers the one that reaches capacity the pod
// can use in the fewest hops. Every hop costs latency, API work and a
// failure domain; in a graph where a region is reachable both through a
// direct child and through a longer path (a diamond, a parent that is also
// a child), the pod takes the short one while it has room (the Watermark
// filter says when it has not).
package pathlength

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "PathLength"

// realNode is the raw score of a real node: it is not compared.
const realNode = -1

// PathLength implements fwk.ScorePlugin.
type PathLength struct{ summaries virtualnode.SummaryCache }

var _ fwk.ScorePlugin = &PathLength{}

// New returns the plugin; it takes no arguments.
func New(_ context.Context, _ runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	return &PathLength{}, nil
}

// Name returns the plugin's name.
func (*PathLength) Name() string { return Name }

// Score is, for a virtual node, the hops from here to the nearest nodes of
// its subtree the pod may run on: 1 to the child's own nodes, plus the
// depth of the nearest matching group of its summary. Real nodes score
// `realNode`; NormalizeScore ranks only the virtual nodes.
func (pl *PathLength) Score(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	node := nodeInfo.Node()
	if !virtualnode.IsVirtual(node) {
		return realNode, nil
	}
	s, _, ok := pl.summaries.Get(node)
	if !ok {
		return 1, nil // no summary yet: as a child with nodes of its own
	}
	depth := -1
	for _, g := range virtualnode.MatchingGroups(pod, node, s) {
		if depth < 0 || g.Depth < depth {
			depth = g.Depth
		}
	}
	if depth < 0 {
		depth = s.Depth // no group matches (the filters have said why)
	}
	return int64(1 + depth), nil
}

// ScoreExtensions returns the plugin, which normalizes its scores.
func (pl *PathLength) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore gives the virtual nodes with the fewest hops the highest
// score and those with the most zero, linearly between; real nodes, and
// every node when all virtual nodes are equally far, get the highest, so
// that this plugin changes nothing but the choice between near and far
// children.
func (pl *PathLength) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	lo, hi := int64(-1), int64(-1)
	for _, s := range scores {
		if s.Score == realNode {
			continue
		}
		if lo < 0 || s.Score < lo {
			lo = s.Score
		}
		hi = max(hi, s.Score)
	}
	for i := range scores {
		if scores[i].Score == realNode || hi == lo {
			scores[i].Score = fwk.MaxNodeScore
			continue
		}
		scores[i].Score = (hi - scores[i].Score) * fwk.MaxNodeScore / (hi - lo)
	}
	return nil
}
