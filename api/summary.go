package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Summary is what a child tells its parent about its whole subtree, as JSON
// in the AnnotationSummary annotation of its virtual node. Its size is
// bounded: the number of groups is bounded by the number of distinct values
// of GroupKeys, and each group keeps at most MaxShapes shapes.
type Summary struct {
	// Version is the schema version (SummaryVersion); absent, so 0, in
	// summaries of agents before version 2, which read as version 1:
	// Covered then lists every cluster whatever the size, and there are
	// no Branches, Clusters, or Values in groups.
	Version int `json:"version,omitempty"`
	// Cluster is the name of the reporting cluster.
	Cluster string `json:"cluster"`
	// Covered lists every cluster whose nodes are counted, sorted, the
	// reporting cluster included, while their names fit in MaxCoveredBytes;
	// beyond, it is omitted (Clusters still counts them).
	Covered []string `json:"covered,omitempty"`
	// Clusters is how many clusters are counted (version 2). Exact while
	// Covered is complete; once it is not, a cluster reached through
	// several children is counted once per path.
	Clusters int `json:"clusters,omitempty"`
	// Branches lists, sorted, the counted clusters where the graph can
	// branch or merge: those with children of their own or with more than
	// one parent (version 2). Split horizon and shared-descendant checks
	// need no other: a parent has children, and two subtrees that share a
	// cluster share the cluster with several parents where they meet.
	// When the names do not fit in MaxCoveredBytes, BranchFilter holds
	// them instead.
	Branches []string `json:"branches,omitempty"`
	// BranchFilter is a Bloom filter of the branch clusters (see
	// CoverFilter), set instead of Branches when those are too many. It
	// may say a cluster is covered when it is not (about 3 in 1,000 at
	// 1,000 branch clusters), never the reverse: the cost is a
	// child not counted toward one parent, never a loop.
	BranchFilter string `json:"branchFilter,omitempty"`
	// Depth is the number of levels below the reporting cluster (0 for a
	// cluster with only real nodes).
	Depth int `json:"depth"`
	// GroupKeys are the label keys that group nodes, in order.
	GroupKeys []string `json:"groupKeys"`
	// Groups are the subtree's nodes grouped by the values of GroupKeys and
	// by their taints, sorted by key.
	Groups []Group `json:"groups"`
	// SharePercent is the share of the subtree's free capacity this summary
	// offers its parent, when it is not all of it (absent: 100): a cluster
	// with several parents splits it between them, so that no ancestor
	// counts it twice. Allocatable and Free of the groups are scaled by
	// it; Nodes and Shapes are not.
	SharePercent int `json:"sharePercent,omitempty"`
	// PodCIDRs are the pod CIDRs of the subtree's nodes, merged into at most
	// MaxPodCIDRs covering prefixes (so possibly wider than what is used),
	// for finding clusters whose pod IPs would collide.
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	// Time is when the summary was computed (RFC 3339).
	Time string `json:"time"`
}

// Group is a set of nodes sharing the values of the group keys and taints.
type Group struct {
	// Labels holds the value of each group key the nodes carry (a key the
	// nodes lack is absent).
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are the taints the nodes share.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// Nodes counts the real nodes in the group.
	Nodes int `json:"nodes"`
	// Depth is how many levels below the reporting cluster the group's
	// nearest nodes are: 0 for its own nodes, 1 for nodes of a child, ...
	// (absent, so 0, in summaries of agents before it existed). Pods go
	// one hop further per level: the scheduler prefers fewer.
	Depth int `json:"depth,omitempty"`
	// Allocatable is the sum of the nodes' allocatable.
	Allocatable corev1.ResourceList `json:"allocatable"`
	// Free is Allocatable minus the requests of every pod on the nodes.
	Free corev1.ResourceList `json:"free"`
	// Shapes are the largest free amounts on single nodes (largest CPU
	// first, then memory), at most MaxShapes: a pod fits the group only if
	// it fits one of them.
	Shapes []corev1.ResourceList `json:"shapes,omitempty"`
	// Values holds, for each group key folded to keep the summary within
	// MaxSummaryBytes (Bound), how many of the group's nodes carry each
	// value; a folded key is absent from Labels. Others counts, per folded
	// key, the nodes whose value is not listed (too many values to list)
	// or that lack the key.
	Values map[string]map[string]int `json:"values,omitempty"`
	Others map[string]int            `json:"others,omitempty"`
}

// MaxShapes bounds Group.Shapes.
const MaxShapes = 4

// SummaryVersion is the version of the schema this code writes.
const SummaryVersion = 2

// MaxSummaryBytes bounds the JSON of a summary (Bound), whatever the size
// of the subtree: the API server refuses more than 256 KiB of annotations
// on an object, and every report and every scheduler read costs its size.
const MaxSummaryBytes = 16 << 10

// MaxCoveredBytes bounds the names listed in Covered, and in Branches.
const MaxCoveredBytes = 2 << 10

// MaxPodCIDRs bounds Summary.PodCIDRs.
const MaxPodCIDRs = 16

// DefaultGroupKeys are the label keys that group nodes in a summary unless
// the agent is configured otherwise.
var DefaultGroupKeys = []string{
	"topology.kubernetes.io/region",
	"topology.kubernetes.io/zone",
	"kubernetes.io/arch",
	"kubernetes.io/os",
	"node.kubernetes.io/instance-type",
}

// ParseSummary returns the summary in the AnnotationSummary annotation of
// node, and false when node has no such annotation or its JSON does not
// parse. The agent writes it, the scheduler plugins and nestctl read it.
func ParseSummary(node *corev1.Node) (*Summary, bool) {
	if node == nil {
		return nil, false
	}
	raw, ok := node.Annotations[AnnotationSummary]
	if !ok || len(raw) > MaxSummaryBytes {
		// Larger than any agent writes: not read at all (the node is
		// then used as one without a summary: for nothing).
		return nil, false
	}
	var s Summary
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, false
	}
	s.dropReservedKeys()
	return &s, true
}

// ReservedLabel reports whether a summary may not claim label key for its
// groups: keys that say which node a node is, or that only the parent's
// admins may set (NodeRestriction's node-restriction.kubernetes.io/, node
// roles), or Nestlet's own. A child claiming them would attract pods
// pinned to another node, or to nodes its admins set apart.
func ReservedLabel(key string) bool {
	if key == corev1.LabelHostname {
		return true
	}
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	// The domains and every subdomain of them (x.node-restriction.kubernetes.io
	// is NodeRestriction's too).
	for _, domain := range []string{"node-restriction.kubernetes.io", "node-role.kubernetes.io", "nestlet.io"} {
		if ns == domain || strings.HasSuffix(ns, "."+domain) {
			return true
		}
	}
	return false
}

// dropReservedKeys removes every ReservedLabel key from s, as if the
// child had not grouped by it.
func (s *Summary) dropReservedKeys() {
	s.GroupKeys = slices.DeleteFunc(s.GroupKeys, ReservedLabel)
	for i := range s.Groups {
		g := &s.Groups[i]
		maps.DeleteFunc(g.Labels, func(k, _ string) bool { return ReservedLabel(k) })
		maps.DeleteFunc(g.Values, func(k string, _ map[string]int) bool { return ReservedLabel(k) })
		maps.DeleteFunc(g.Others, func(k string, _ int) bool { return ReservedLabel(k) })
	}
}

// FormatSummary returns s as the value of the AnnotationSummary annotation.
func FormatSummary(s Summary) (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encoding the summary of %s: %w", s.Cluster, err)
	}
	return string(b), nil
}

// Covers reports whether the clusters counted in s include cluster, as far
// as a cluster with children (a parent) or with several parents is
// concerned: only those are listed once the summary is large. A version 1
// summary lists every cluster.
func (s *Summary) Covers(cluster string) bool {
	if slices.Contains(s.Covered, cluster) || slices.Contains(s.Branches, cluster) {
		return true
	}
	return s.BranchFilter != "" && ParseCoverFilter(s.BranchFilter).MayContain(cluster)
}

// SharesBranch reports whether the subtrees of a and b may have a cluster
// in common: one with several parents, where they meet (a diamond). Bloom
// filters make it "may": two filters that share a set bit count as
// sharing.
func SharesBranch(a, b *Summary) bool {
	for _, s := range [2][2]*Summary{{a, b}, {b, a}} {
		for _, name := range s[0].branchNames() {
			if s[1].Covers(name) {
				return true
			}
		}
	}
	if a.BranchFilter != "" && b.BranchFilter != "" {
		return ParseCoverFilter(a.BranchFilter).Intersects(ParseCoverFilter(b.BranchFilter))
	}
	return false
}

// branchNames are the clusters s lists as branches (all of Covered for a
// version 1 summary).
func (s *Summary) branchNames() []string {
	if s.Version < 2 {
		return s.Covered
	}
	return s.Branches
}

// FoldedKeys are the group keys g lists values of or counts in Others (see
// Values), sorted: keys folded to keep the summary small.
func (g *Group) FoldedKeys() []string {
	keys := make([]string, 0, len(g.Values)+len(g.Others))
	for k := range g.Values {
		keys = append(keys, k)
	}
	for k := range g.Others {
		if _, ok := g.Values[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
