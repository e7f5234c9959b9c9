package parent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/summary"
)

// Pod CIDR overlaps are found by the parent, which alone sees all its
// nodes (a node identity may read only its own Node): its agent compares
// each child's pod CIDRs (from the summary) with every other node's and
// child's, and writes the result on the child's virtual node
// (api.AnnotationPodCIDROverlap). The child reads it back from its own
// node and reports it as ConditionPodCIDRsDistinct on its Target
// (provider/child/podcidrs.go).

// maxClashes is how many overlaps a description names.
const maxClashes = 5

// podCIDROverlap returns what the pod CIDRs node n (a child's virtual
// node) claims overlap among the other nodes of this cluster and what they
// claim: api.PodCIDROverlapNone, or a description. Children that share a
// cluster with n (a diamond), and other Targets of n's own cluster (the
// same cluster under another name), run the same pods: no conflict. It
// says where pod IPs are ambiguous, for both sides to see; what each
// child is routed is the grants' decision (grants.go), not this.
func podCIDROverlap(n *corev1.Node, nodes corelisters.NodeLister, cache *cidrCache) string {
	own, ownSum := cache.of(n)
	if len(own) == 0 {
		return api.PodCIDROverlapNone
	}
	all, err := nodes.List(labels.Everything())
	if err != nil {
		return api.PodCIDROverlapNone
	}
	// The oldest first, and at most maxClashes of them with no count of
	// the rest: a node that joins later changes no description that is
	// full already. Many children with the same default pod CIDR (kind's,
	// say) joining one after another would otherwise each rewrite every
	// other's.
	slices.SortFunc(all, func(a, b *corev1.Node) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	uid := n.Annotations[api.AnnotationClusterUID]
	var clashes []string
	for _, o := range all {
		if o.Name == n.Name || uid != "" && o.Annotations[api.AnnotationClusterUID] == uid {
			continue
		}
		theirs, theirSum := cache.of(o)
		if ownSum != nil && theirSum != nil && api.SharesBranch(ownSum, theirSum) {
			continue
		}
		what := "node " + o.Name
		if theirSum != nil {
			what = "cluster " + o.Name
		}
		for _, pair := range summary.Overlaps(own, theirs) {
			clashes = append(clashes, fmt.Sprintf("%s overlaps %s of %s", pair[0], pair[1], what))
		}
	}
	if len(clashes) == 0 {
		return api.PodCIDROverlapNone
	}
	if len(clashes) > maxClashes {
		clashes = append(clashes[:maxClashes], "and more")
	}
	return strings.Join(clashes, "; ")
}

// cidrCache keeps, by node, the pod CIDRs and covered clusters of its
// summary, parsed again only when the summary annotation changes: the
// decorator compares every child with every other node on each report.
type cidrCache struct{ m sync.Map } // node name -> cidrEntry

type cidrEntry struct {
	raw   string
	cidrs []string
	sum   *api.Summary
}

// of returns a node's pod CIDRs: a virtual node's from its summary (which
// it returns too, with only what says which clusters it covers); a real
// node's from its spec.
func (c *cidrCache) of(n *corev1.Node) (cidrs []string, sum *api.Summary) {
	raw, ok := n.Annotations[api.AnnotationSummary]
	if ok && len(raw) > api.MaxSummaryBytes {
		return nil, nil // not read at all (api.ParseSummary)
	}
	if !ok {
		if len(n.Spec.PodCIDRs) > 0 {
			return n.Spec.PodCIDRs, nil
		}
		if n.Spec.PodCIDR != "" {
			return []string{n.Spec.PodCIDR}, nil
		}
		return nil, nil
	}
	if v, ok := c.m.Load(n.Name); ok && v.(cidrEntry).raw == raw {
		e := v.(cidrEntry)
		return e.cidrs, e.sum
	}
	// Only these fields, not the whole summary.
	var part struct {
		Version      int      `json:"version"`
		Covered      []string `json:"covered"`
		Branches     []string `json:"branches"`
		BranchFilter string   `json:"branchFilter"`
		PodCIDRs     []string `json:"podCIDRs"`
	}
	if err := json.Unmarshal([]byte(raw), &part); err != nil {
		return nil, nil
	}
	sum = &api.Summary{Version: part.Version, Covered: part.Covered, Branches: part.Branches, BranchFilter: part.BranchFilter}
	c.m.Store(n.Name, cidrEntry{raw: raw, cidrs: part.PodCIDRs, sum: sum})
	return part.PodCIDRs, sum
}
