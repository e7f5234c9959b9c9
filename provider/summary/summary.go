// Package summary computes what a child cluster reports to one parent: the
// capacity and labels of the virtual node that stands for it, and the
// api.Summary of its whole subtree. Everything here is a pure function of
// its Input; inputs are never mutated.
package summary

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/nestlet/nestlet/api"
)

// Input is the state of the reporting cluster that Compute summarises.
type Input struct {
	// Cluster is the name of this (reporting) cluster.
	Cluster string
	// Parent is the name of the parent the report goes to, for split
	// horizon; "" if unknown.
	Parent string
	// GroupKeys are the label keys that group nodes; nil means
	// api.DefaultGroupKeys.
	GroupKeys []string
	// Nodes are every node of this cluster (read-only).
	Nodes []*corev1.Node
	// Pods are every pod of this cluster, in any phase (read-only).
	Pods []*corev1.Pod
	// Now is the time the summary is stamped with.
	Now time.Time
	// SharePercent is the share of the free capacity offered to Parent
	// (1..100); 0 means 100.
	SharePercent int
	// Parents is how many parents this cluster has (its Targets): one with
	// several is a branch cluster (api.Summary.Branches), as is one with
	// children.
	Parents int
	// ChildPodCIDRs, when set, says whether a node is a child's virtual
	// node and, for one, the pod CIDRs this cluster grants it: only that
	// is carried up (Summary.PodCIDRs) for it, never its claim, and a node
	// with a summary is a child's whatever it says. Unset: the claims are
	// carried as they are.
	ChildPodCIDRs func(n *corev1.Node) (cidrs []string, child bool)
	// Limits caps what Parent's pods may request here in all (Target
	// spec.limits; limits.go): nil, no cap.
	Limits corev1.ResourceList
}

// Result is what the reporting cluster publishes on its virtual node in the
// parent.
type Result struct {
	// Allocatable is what the virtual node advertises as capacity and
	// allocatable: the counted nodes' allocatable minus the requests of the
	// counted pods the parent did not send, clamped at zero.
	Allocatable corev1.ResourceList
	// Labels are the labels with one value over the whole counted subtree
	// that a node may set on itself.
	Labels map[string]string
	// Summary describes the subtree; it goes in the api.AnnotationSummary
	// annotation as JSON.
	Summary api.Summary
	// Nodes counts the cluster's nodes, in any state; ReadyNodes those of
	// them whose Ready condition is True (cordoned or not). A cluster with
	// nodes and none Ready cannot run a pod: its virtual node says so.
	Nodes, ReadyNodes int
}

// Compute returns what the cluster described by in reports to in.Parent.
//
// A node counts when it is Ready and not cordoned; a virtual node (one with
// the api.AnnotationSummary annotation) counts only if its summary parses
// and does not cover in.Parent (split horizon). A pod counts when it is
// bound to a counted node and neither Succeeded nor Failed.
func Compute(in Input) Result {
	keys := groupKeys(in.GroupKeys)
	nodes := countNodes(in.Nodes, in.Parent)
	load := countPods(in.Pods, nodes, in.Parent)
	share := in.SharePercent
	if share <= 0 || share >= 100 {
		share = 100
	}
	r := Result{
		Allocatable: allocatable(nodes, load, share),
		Labels:      commonLabels(nodes),
		Summary: api.Summary{
			Version:   api.SummaryVersion,
			Cluster:   in.Cluster,
			Depth:     depth(nodes),
			GroupKeys: keys,
			Groups:    groups(keys, nodes, load),
			PodCIDRs:  podCIDRs(nodes, in.ChildPodCIDRs),
			Time:      in.Now.UTC().Format(time.RFC3339),
		},
	}
	r.Nodes, r.ReadyNodes = readiness(in.Nodes)
	setCoverage(&r.Summary, in, nodes)
	if share < 100 {
		r.Summary.SharePercent = share
		for i := range r.Summary.Groups {
			g := &r.Summary.Groups[i]
			g.Allocatable, g.Free = scale(g.Allocatable, share), scale(g.Free, share)
		}
	}
	limitTo(&r, in.Limits, parentUse(load))
	bound(&r.Summary)
	return r
}

// Equal reports whether a and b say the same thing: everything but
// Summary.Time is compared, resource quantities by value ("1" equals
// "1000m"), and nil equals empty for maps and slices. Of the node counts,
// only whether the cluster can run pods (CanRun) matters.
func Equal(a, b Result) bool {
	if CanRun(a) != CanRun(b) {
		return false
	}
	a.Summary.Time, b.Summary.Time = "", ""
	a.Nodes, a.ReadyNodes, b.Nodes, b.ReadyNodes = 0, 0, 0, 0
	return apiequality.Semantic.DeepEqual(a, b)
}

// CanRun reports whether the cluster r describes can run pods: it has no
// node yet (a mid cluster before its children join), or one is Ready.
func CanRun(r Result) bool { return r.Nodes == 0 || r.ReadyNodes > 0 }

// groupKeys returns the group keys to use, a copy so that the result never
// aliases api.DefaultGroupKeys or the caller's slice.
func groupKeys(keys []string) []string {
	if keys == nil {
		keys = api.DefaultGroupKeys
	}
	return slices.Clone(keys)
}

// readiness counts the nodes (each name once) and the Ready ones.
func readiness(nodes []*corev1.Node) (all, ready int) {
	seen := map[string]bool{}
	for _, n := range nodes {
		if n == nil || seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		all++
		if NodeReady(n) {
			ready++
		}
	}
	return all, ready
}

// depth is 0 without counted virtual nodes, else one more than the deepest
// of them.
func depth(nodes []counted) int {
	d := 0
	for _, c := range nodes {
		if c.summary != nil {
			d = max(d, c.summary.Depth+1)
		}
	}
	return d
}
