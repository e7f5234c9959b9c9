package api

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Summary is what a child tells its parent about its whole subtree, as JSON
// in the AnnotationSummary annotation of its virtual node. Its size is
// bounded: the number of groups is bounded by the number of distinct values
// of GroupKeys, and each group keeps at most MaxShapes shapes.
type Summary struct {
	// Cluster is the name of the reporting cluster.
	Cluster string `json:"cluster"`
	// Covered lists every cluster whose nodes are counted, sorted, the
	// reporting cluster included.
	Covered []string `json:"covered"`
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
}

// MaxShapes bounds Group.Shapes.
const MaxShapes = 4

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
	if !ok {
		return nil, false
	}
	var s Summary
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, false
	}
	return &s, true
}

// FormatSummary returns s as the value of the AnnotationSummary annotation.
func FormatSummary(s Summary) (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encoding the summary of %s: %w", s.Cluster, err)
	}
	return string(b), nil
}
