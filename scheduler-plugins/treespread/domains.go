package treespread

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// placement is one set of domains a node offers the pod: a value per
// constraint ("" where the node has none), and which of them lie inside a
// child (from its summary's groups), to be written on the pod.
type placement struct {
	values []string
	inside []bool
}

// maxPlacements bounds the placements tried on one virtual node.
const maxPlacements = 256

// placements returns the sets of domains the pod may be placed in on node
// n: a real node's labels; for a virtual node, those of each summary group
// the pod may run on.
func (pl *TreeSpread) placements(s *spreadState, pod *corev1.Pod, n *corev1.Node) []placement {
	if !virtualnode.IsVirtual(n) {
		p := placement{values: make([]string, len(s.constraints)), inside: make([]bool, len(s.constraints))}
		for i, c := range s.constraints {
			p.values[i] = n.Labels[c.key]
		}
		return []placement{p}
	}
	sum, _, ok := pl.summaries.Get(n)
	if !ok {
		return nil
	}
	var out []placement
	seen := map[string]bool{}
	for _, g := range virtualnode.MatchingGroups(pod, n, sum) {
		for _, p := range groupPlacements(s, n, g) {
			id := placementID(p)
			if !seen[id] && len(out) < maxPlacements {
				seen[id] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// groupPlacements are the domain sets of group g of virtual node n: a key
// the group has a value for is inside the child; a key folded to keep the
// summary small offers each listed value; other keys take the node's own
// label, if any.
func groupPlacements(s *spreadState, n *corev1.Node, g *api.Group) []placement {
	choices := make([][]string, len(s.constraints))
	inside := make([]bool, len(s.constraints))
	for i, c := range s.constraints {
		switch {
		case perNode(c.key):
			// One of the least loaded nodes inside, chosen below.
			choices[i] = []string{s.hostFor(i, n.Name, 1)}
		case g.Labels[c.key] != "":
			choices[i], inside[i] = []string{g.Labels[c.key]}, true
		case len(g.Values[c.key]) > 0:
			for _, v := range slices.Sorted(maps.Keys(g.Values[c.key])) {
				if g.Values[c.key][v] > 0 {
					choices[i] = append(choices[i], v)
				}
			}
			inside[i] = true
		default:
			choices[i] = []string{n.Labels[c.key]}
		}
		if len(choices[i]) == 0 {
			choices[i] = []string{""}
		}
	}
	var out []placement
	idx := make([]int, len(choices))
	for len(out) < maxPlacements {
		p := placement{values: make([]string, len(choices)), inside: inside}
		for i := range choices {
			p.values[i] = choices[i][idx[i]]
		}
		out = append(out, p)
		i := 0
		for ; i < len(idx); i++ {
			if idx[i]++; idx[i] < len(choices[i]) {
				break
			}
			idx[i] = 0
		}
		if i == len(idx) {
			break
		}
	}
	return out
}

func placementID(p placement) string {
	id := ""
	for _, v := range p.values {
		id += v + "\x00"
	}
	return id
}

// countedDomains returns, per constraint, the domains of node n that the
// constraint counts: those of the nodes (or, on a virtual node, of the
// groups) that its node affinity and taint policies admit.
func (pl *TreeSpread) countedDomains(s *spreadState, pod *corev1.Pod, n *corev1.Node) []map[string]bool {
	out := make([]map[string]bool, len(s.constraints))
	for i := range out {
		out[i] = map[string]bool{}
	}
	if !virtualnode.IsVirtual(n) {
		for i, c := range s.constraints {
			v := n.Labels[c.key]
			if v == "" || !admits(s, c, pod, n, n.Spec.Taints) {
				continue
			}
			out[i][v] = true
		}
		return out
	}
	sum, _, ok := pl.summaries.Get(n)
	if !ok {
		return out
	}
	// The virtual node's own taints (a child lost: unreachable) but the
	// one every virtual node has, and its groups' taints.
	_, nodeUntolerated := virtualnode.UntoleratedTaint(pod, n.Spec.Taints, true)
	for gi := range sum.Groups {
		g := &sum.Groups[gi]
		labelsMatch := virtualnode.GroupMatches(s.tolerant, n, g, s.affinity)
		_, untolerated := virtualnode.UntoleratedTaint(pod, g.Taints, false)
		untolerated = untolerated || nodeUntolerated
		for _, p := range groupPlacements(s, n, g) {
			for i, c := range s.constraints {
				if p.values[i] == "" || perNode(c.key) || (c.honorAffinity && !labelsMatch) || (c.honorTaints && untolerated) {
					continue
				}
				out[i][p.values[i]] = true
			}
		}
	}
	for i, hosts := range hostDomains(s, pod, n, sum) {
		for _, h := range hosts {
			out[i][h] = true
		}
	}
	return out
}

// admits reports whether constraint c counts node n (or a stand-in for a
// group) by its node affinity and taint policies.
func admits(s *spreadState, c constraint, pod *corev1.Pod, n *corev1.Node, taints []corev1.Taint) bool {
	if c.honorAffinity {
		if ok, _ := s.affinity.Match(n); !ok {
			return false
		}
	}
	if c.honorTaints {
		if _, untolerated := virtualnode.UntoleratedTaint(pod, taints, false); untolerated {
			return false
		}
	}
	return true
}

// domainsOf returns the domains chosen for pod p on a virtual node: those
// written on it, or reserved for it and not yet seen written.
func (pl *TreeSpread) domainsOf(p *corev1.Pod) map[string]string {
	if d := api.Domains(p); d != nil {
		return d
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.chosen[p.UID].domains
}
