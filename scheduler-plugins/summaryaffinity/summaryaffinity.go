// Package summaryaffinity is the SummaryAffinity scheduler plugin: it
// decides whether a pod's nodeSelector, required node affinity and
// tolerations fit a node. A real node is judged exactly as the built-in
// NodeAffinity and TaintToleration filters judge it; a virtual node is judged
// by the groups of its summary, so a child spanning east and west fits pods
// for either. The virtual-node taint counts as tolerated for every pod not
// owned by a DaemonSet; DaemonSet pods fit a virtual node only where its
// parent relaxed that taint to PreferNoSchedule (api.TakesDaemonSets: a
// cluster made only of clusters runs a DaemonSet once per child).
package summaryaffinity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "SummaryAffinity"

// Messages for real nodes, as the built-in plugins word them.
const (
	ErrReasonAffinity = "node(s) didn't match Pod's node affinity/selector"
	ErrReasonTaint    = "node(s) had untolerated taint {%s: %s}"
)

// SummaryAffinity implements fwk.PreFilterPlugin and fwk.FilterPlugin.
type SummaryAffinity struct {
	summaries virtualnode.SummaryCache
}

var (
	_ fwk.PreFilterPlugin = &SummaryAffinity{}
	_ fwk.FilterPlugin    = &SummaryAffinity{}
)

const stateKey fwk.StateKey = Name + "/affinity"

type affinityState struct {
	affinity nodeaffinity.RequiredNodeAffinity
}

func (s *affinityState) Clone() fwk.StateData { return s }

// PreFilter works out the pod's required node affinity once per cycle, as
// the built-in NodeAffinity plugin does.
func (*SummaryAffinity) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(stateKey, &affinityState{affinity: nodeaffinity.GetRequiredNodeAffinity(pod)})
	return nil, nil
}

// PreFilterExtensions returns nil: the plugin keeps no per-node state.
func (*SummaryAffinity) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

func affinityOf(state fwk.CycleState, pod *corev1.Pod) nodeaffinity.RequiredNodeAffinity {
	if state != nil {
		if v, err := state.Read(stateKey); err == nil {
			return v.(*affinityState).affinity
		}
	}
	return nodeaffinity.GetRequiredNodeAffinity(pod)
}

// New returns the plugin; it takes no arguments.
func New(_ context.Context, _ runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	return &SummaryAffinity{}, nil
}

// Name returns the plugin's name.
func (*SummaryAffinity) Name() string { return Name }

// Filter decides whether pod's node constraints fit the node.
func (pl *SummaryAffinity) Filter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	if !virtualnode.IsVirtual(node) {
		return filterReal(pod, node, affinityOf(state, pod))
	}
	return pl.filterVirtual(pod, node)
}

func filterReal(pod *corev1.Pod, node *corev1.Node, affinity nodeaffinity.RequiredNodeAffinity) *fwk.Status {
	if ok, _ := affinity.Match(node); !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ErrReasonAffinity)
	}
	if taint, untolerated := virtualnode.UntoleratedTaint(pod, node.Spec.Taints, false); untolerated {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(ErrReasonTaint, taint.Key, taint.Value))
	}
	return nil
}

func (pl *SummaryAffinity) filterVirtual(pod *corev1.Pod, node *corev1.Node) *fwk.Status {
	if virtualnode.IsDaemonSetPod(pod) && !api.TakesDaemonSets(node.Spec.Taints) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("%s: DaemonSet pods do not go to virtual nodes (each cluster runs its own) but where the parent's agent has --child-taint-effect=PreferNoSchedule", node.Name))
	}
	// Taints of the node itself (a Target's taints, unreachable...), but
	// the virtual-node taint.
	if taint, untolerated := virtualnode.UntoleratedTaint(pod, node.Spec.Taints, true); untolerated {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: untolerated taint {%s: %s}", node.Name, taint.Key, taint.Value))
	}
	s, _, ok := pl.summaries.Get(node)
	if !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: no summary reported yet", node.Name))
	}
	if len(virtualnode.MatchingGroups(pod, node, s)) == 0 {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: no group matches %s", node.Name, virtualnode.DescribeSelector(pod)))
	}
	return nil
}
