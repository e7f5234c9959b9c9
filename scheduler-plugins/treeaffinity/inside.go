package treeaffinity

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Required affinity on a key whose domains lie inside a child (to be in
// the zone of another pod, where the child spans zones): the built-in
// filter needs the key's label on the node, which such a virtual node
// lacks, so it refused the node even when the pod to join runs there, and
// it does not count the pods on such a node anywhere. So the built-in
// filter judges the pod without those terms (its own run, on a cycle state
// of its own), and TreeAffinity judges the terms on every node:
// one whose key lies inside the node holds when a pod it matches is on the
// node (the delegate keeps the term, and the child, which sees the zones,
// places the pod beside it); one whose key the node carries, when a pod it
// matches is on a node of that domain. As the built-in filter, a pod that
// matches its own terms, when no pod anywhere matches them, may go
// anywhere (the first of a group that keeps together).

// insideAffinityKey holds the cycle's insideAffinity.
const insideAffinityKey fwk.StateKey = "TreeAffinity/insideAffinity"

// insideAffinity is the built-in filter's run without the pod's affinity
// terms on keys some virtual node lacks, and those terms.
type insideAffinity struct {
	state   fwk.CycleState
	pod     *corev1.Pod
	skipped bool
	terms   []fwk.AffinityTerm
	// first: no pod anywhere matches the terms, and the pod matches them
	// all.
	first bool
}

func (a *insideAffinity) Clone() fwk.StateData {
	c := *a
	c.state = a.state.Clone()
	return &c
}

func readInsideAffinity(state fwk.CycleState) *insideAffinity {
	d, err := state.Read(insideAffinityKey)
	if err != nil {
		return nil
	}
	a, _ := d.(*insideAffinity)
	return a
}

// preFilterInside prepares the built-in filter's run without the pod's
// required affinity terms on keys (other than the hostname) that some
// virtual node lacks; nothing when it has none.
func (pl *TreeAffinity) preFilterInside(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	a := pod.Spec.Affinity
	if a == nil || a.PodAffinity == nil || len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		return nil
	}
	lacking := map[string]bool{}
	for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.TopologyKey == corev1.LabelHostname {
			continue
		}
		for _, ni := range nodes {
			if n := ni.Node(); n != nil && virtualnode.IsVirtual(n) && n.Labels[t.TopologyKey] == "" {
				lacking[t.TopologyKey] = true
				break
			}
		}
	}
	if len(lacking) == 0 {
		return nil
	}
	stripped := pod.DeepCopy()
	pa := stripped.Spec.Affinity.PodAffinity
	pa.RequiredDuringSchedulingIgnoredDuringExecution = slices.DeleteFunc(pa.RequiredDuringSchedulingIgnoredDuringExecution,
		func(t corev1.PodAffinityTerm) bool { return lacking[t.TopologyKey] })
	info, err := framework.NewPodInfo(pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	ia := &insideAffinity{state: framework.NewCycleState(), pod: stripped}
	for _, t := range info.GetRequiredAffinityTerms() {
		if lacking[t.TopologyKey] {
			ia.terms = append(ia.terms, t)
		}
	}
	_, s := pl.inner.PreFilter(ctx, ia.state, stripped, nodes)
	switch {
	case s.Code() == fwk.Skip:
		ia.skipped = true
	case !s.IsSuccess():
		return s
	}
	ia.first = pl.firstOfGroup(pod, ia.terms, nodes)
	state.Write(insideAffinityKey, ia)
	return nil
}

// firstOfGroup reports whether the pod matches all the terms while no pod
// on any node matches any of them.
func (pl *TreeAffinity) firstOfGroup(pod *corev1.Pod, terms []fwk.AffinityTerm, nodes []fwk.NodeInfo) bool {
	for _, t := range terms {
		if !t.Matches(pod, pl.namespaceLabels(pod.Namespace)) {
			return false
		}
	}
	for _, ni := range nodes {
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			for _, t := range terms {
				if t.Matches(p, pl.namespaceLabels(p.Namespace)) {
					return false
				}
			}
		}
	}
	return true
}

// filterInside judges node n (as given to the built-in filter: a virtual
// node without its hostname) when the pod has terms set aside: the
// built-in filter without them, then each of them, on every node, since
// the built-in filter's count of the pods they match leaves out those on
// virtual nodes without the key.
func (pl *TreeAffinity) filterInside(ctx context.Context, a *insideAffinity, ni fwk.NodeInfo, n *corev1.Node) *fwk.Status {
	if !a.skipped {
		if s := pl.inner.Filter(ctx, a.state, a.pod, &withNode{NodeInfo: ni, node: n}); !s.IsSuccess() {
			return s
		}
	}
	virtual := virtualnode.IsVirtual(n)
	for _, t := range a.terms {
		v := n.Labels[t.TopologyKey]
		var held bool
		switch {
		case v == "" && !virtual:
			// As the built-in filter: a node without the key is no
			// domain of it.
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ErrReasonAffinityInside)
		case a.first:
			held = true
		case v == "":
			held = pl.matchesOn(t, ni)
		default:
			held = pl.matchesInDomain(t, v)
		}
		if !held {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ErrReasonAffinityInside)
		}
	}
	return nil
}

// ErrReasonAffinityInside is the reason a node is refused when no pod the
// pod must share a domain with (required affinity on a key whose domains
// lie inside some child) runs in its domain (on a virtual node without the
// key: on it).
const ErrReasonAffinityInside = "node(s) didn't match pod affinity rules (no pod the affinity names runs in the node's domain or below it)"

// matchesOn reports whether a pod on the node matches term t.
func (pl *TreeAffinity) matchesOn(t fwk.AffinityTerm, ni fwk.NodeInfo) bool {
	for _, pi := range ni.GetPods() {
		if p := pi.GetPod(); p.DeletionTimestamp == nil && t.Matches(p, pl.namespaceLabels(p.Namespace)) {
			return true
		}
	}
	return false
}

// matchesInDomain reports whether a pod on a node whose t.TopologyKey is
// value matches term t.
func (pl *TreeAffinity) matchesInDomain(t fwk.AffinityTerm, value string) bool {
	if pl.snapshot == nil {
		return false
	}
	nodes, err := pl.snapshot().NodeInfos().List()
	if err != nil {
		return false
	}
	for _, ni := range nodes {
		if n := ni.Node(); n != nil && n.Labels[t.TopologyKey] == value && pl.matchesOn(t, ni) {
			return true
		}
	}
	return false
}
