package summary

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

// setCoverage fills the clusters s counts: Covered (every one, while the
// names fit in api.MaxCoveredBytes and every child listed all of its own),
// Clusters, and Branches or, when those do not fit, BranchFilter.
func setCoverage(s *api.Summary, in Input, nodes []counted) {
	all := []string{}
	complete := true
	clusters := 0
	var branches []string
	var filters []api.CoverFilter
	if in.Cluster != "" {
		all = append(all, in.Cluster)
		clusters = 1
		if in.Parents > 1 || hasChildren(in.Nodes) {
			branches = append(branches, in.Cluster)
		}
	}
	for _, c := range nodes {
		cs := c.summary
		if cs == nil {
			continue
		}
		if cs.Version < 2 {
			// Version 1 lists every cluster, so every branch among them.
			all = append(all, cs.Covered...)
			branches = append(branches, cs.Covered...)
			clusters += len(cs.Covered)
			continue
		}
		if cs.Covered == nil {
			complete = false
		}
		all = append(all, cs.Covered...)
		clusters += max(cs.Clusters, len(cs.Covered))
		branches = append(branches, cs.Branches...)
		if cs.BranchFilter != "" {
			filters = append(filters, api.ParseCoverFilter(cs.BranchFilter))
		}
	}
	all = uniqueNames(all)
	if complete {
		clusters = len(all)
		if namesBytes(all) <= api.MaxCoveredBytes {
			s.Covered = all
		}
	}
	s.Clusters = clusters
	branches = uniqueNames(branches)
	if len(filters) == 0 && namesBytes(branches) <= api.MaxCoveredBytes {
		s.Branches = branches
		return
	}
	f := api.NewCoverFilter()
	for _, g := range filters {
		f.Union(g)
	}
	for _, name := range branches {
		f.Add(name)
	}
	s.BranchFilter = f.String()
}

// hasChildren reports whether some node is a child's virtual node, counted
// or not.
func hasChildren(nodes []*corev1.Node) bool {
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if _, virtual := n.Annotations[api.AnnotationSummary]; virtual {
			return true
		}
	}
	return false
}

// uniqueNames returns names sorted and unique, without empty ones; nil if
// none is left.
func uniqueNames(names []string) []string {
	out := slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == "" })
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// namesBytes is about what names take in JSON.
func namesBytes(names []string) int {
	n := 0
	for _, s := range names {
		n += len(s) + 3
	}
	return n
}
