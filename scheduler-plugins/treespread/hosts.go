package treespread

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Spread over the hostname: each node is a domain of its own, and a child
// holds as many as it has nodes (those of its summary's groups the
// constraint counts), which this level cannot name. Seen as one host, a
// child of one node would get as many replicas as a child of ten. So a
// virtual node stands for that many hostname domains, and the matching
// pods on it are counted as its child spreads them: the delegate keeps its
// hostname constraint, so the child places each on one of its least loaded
// nodes. A pod that goes there lands in one of the least loaded of them;
// nothing is written on its binding, since the level below chooses the
// node.

// maxHostDomains caps the hostname domains one virtual node stands for.
const maxHostDomains = 1024

// perNode reports whether key's domains are single nodes.
func perNode(key string) bool { return key == corev1.LabelHostname }

// hostDomain names the i-th hostname domain inside virtual node node
// (never a real label value: it holds a NUL).
func hostDomain(node string, i int) string { return node + "\x00" + strconv.Itoa(i) }

// hostDomains returns, for each per-node constraint, the hostname domains
// virtual node n stands for: one per node of the groups the constraint
// counts (by its node affinity and taint policies; with nodeTaintsPolicy
// Honor, none for a virtual node tainted as a lost child's is).
func hostDomains(s *spreadState, pod *corev1.Pod, n *corev1.Node, sum *api.Summary) map[int][]string {
	out := map[int][]string{}
	_, nodeUntolerated := virtualnode.UntoleratedTaint(pod, n.Spec.Taints, true)
	for i, c := range s.constraints {
		if !perNode(c.key) || (c.honorTaints && nodeUntolerated) {
			continue
		}
		nodes := 0
		for gi := range sum.Groups {
			g := &sum.Groups[gi]
			if c.honorAffinity && !virtualnode.GroupMatches(s.tolerant, n, g, s.affinity) {
				continue
			}
			if _, untolerated := virtualnode.UntoleratedTaint(pod, g.Taints, false); c.honorTaints && untolerated {
				continue
			}
			nodes += g.Nodes
		}
		for j := range min(nodes, maxHostDomains) {
			out[i] = append(out[i], hostDomain(n.Name, j))
		}
	}
	return out
}

// hostFor returns the hostname domain of virtual node node that a pod
// counted there (delta 1) takes, the least loaded, or that one leaving it
// (delta -1) frees, the most loaded; "" when it stands for none.
func (s *spreadState) hostFor(i int, node string, delta int) string {
	best := ""
	for _, d := range s.hosts[i][node] {
		n, b := s.counts[i][d], s.counts[i][best]
		if best == "" || (delta > 0 && n < b) || (delta < 0 && n > b) {
			best = d
		}
	}
	return best
}
