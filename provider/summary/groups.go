package summary

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

// transientTaintPrefix marks taints the node lifecycle controller sets and
// lifts on its own (not-ready, unreachable, pressure...): they say nothing
// lasting about a group.
const transientTaintPrefix = "node.kubernetes.io/"

// groups returns the groups of the counted subtree, sorted by their
// canonical key: real nodes grouped by the values of keys and their taints,
// the groups of virtual nodes' summaries merged into the same grouping.
func groups(keys []string, nodes []counted, l load) []api.Group {
	byID := map[string]*api.Group{}
	for _, c := range nodes {
		if c.summary == nil {
			addNode(byID, keys, c.node, l.perNode[c.node.Name])
			continue
		}
		for _, g := range c.summary.Groups {
			addGroup(byID, keys, g)
		}
	}
	return finish(byID)
}

// addNode counts a real node, whose pods request used, in its group.
func addNode(byID map[string]*api.Group, keys []string, n *corev1.Node, used corev1.ResourceList) {
	free := subClamped(n.Status.Allocatable, used)
	g := api.Group{
		Labels: project(n.Labels, keys), Taints: canonicalTaints(n.Spec.Taints), Nodes: 1,
		Allocatable: n.Status.Allocatable, Free: free, Shapes: []corev1.ResourceList{free},
	}
	mergeInto(byID, idOf(g), g)
}

// addGroup merges a group of a child's summary into the group with the same
// labels (projected on keys), folded keys and taints, one level further
// down.
func addGroup(byID map[string]*api.Group, keys []string, child api.Group) {
	g := api.Group{
		Labels: project(child.Labels, keys), Taints: canonicalTaints(child.Taints), Depth: child.Depth + 1, Nodes: child.Nodes,
		Allocatable: child.Allocatable, Free: child.Free, Shapes: child.Shapes,
	}
	for _, k := range keys {
		if vs, ok := child.Values[k]; ok {
			if g.Values == nil {
				g.Values = map[string]map[string]int{}
			}
			g.Values[k] = vs
		}
		if n, ok := child.Others[k]; ok {
			if g.Others == nil {
				g.Others = map[string]int{}
			}
			g.Others[k] = n
		}
	}
	mergeInto(byID, idOf(g), g)
}

// mergeInto adds g to the group id of byID, creating it if needed: nodes,
// resources, shapes and value counts add up; the depth is that of the
// nearest nodes. g's maps are never changed or kept.
func mergeInto(byID map[string]*api.Group, id string, g api.Group) {
	m, ok := byID[id]
	if !ok {
		m = &api.Group{Labels: g.Labels, Taints: g.Taints, Depth: g.Depth, Allocatable: corev1.ResourceList{}, Free: corev1.ResourceList{}}
		byID[id] = m
	}
	m.Depth = min(m.Depth, g.Depth)
	m.Nodes += g.Nodes
	AddTo(m.Allocatable, g.Allocatable)
	AddTo(m.Free, g.Free)
	m.Shapes = append(m.Shapes, g.Shapes...)
	for k, vs := range g.Values {
		if m.Values == nil {
			m.Values = map[string]map[string]int{}
		}
		if m.Values[k] == nil {
			m.Values[k] = map[string]int{}
		}
		for v, n := range vs {
			m.Values[k][v] += n
		}
	}
	for k, n := range g.Others {
		if m.Others == nil {
			m.Others = map[string]int{}
		}
		m.Others[k] += n
	}
}

// idOf is the identity of a group: its labels, folded keys and taints.
func idOf(g api.Group) string { return groupID(g.Labels, g.Taints, g.FoldedKeys()) }

// finish returns the groups sorted by canonical key, each with its best
// shapes only.
func finish(byID map[string]*api.Group) []api.Group {
	out := make([]api.Group, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		g := byID[id]
		g.Shapes = bestShapes(g.Shapes)
		out = append(out, *g)
	}
	return out
}

// project returns the values of keys that labels carries; nil if none.
func project(labels map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		v, ok := labels[k]
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// canonicalTaints returns a sorted copy of taints without the transient ones
// and without TimeAdded, which says when, not what; nil if none is left.
func canonicalTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if strings.HasPrefix(t.Key, transientTaintPrefix) {
			continue
		}
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	slices.SortFunc(out, func(a, b corev1.Taint) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value), cmp.Compare(a.Effect, b.Effect))
	})
	return out
}

// groupID is the canonical string of a group: its labels sorted by key, its
// folded keys, then its (sorted) taints. Quoting keeps it unambiguous whatever the strings;
// the separators (" " and "!") sort before the opening quote of a further
// entry, so a group whose entries are a prefix of another's sorts first.
func groupID(labels map[string]string, taints []corev1.Taint, folded []string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&b, "%q=%q ", k, labels[k])
	}
	for _, k := range folded {
		fmt.Fprintf(&b, "%q=* ", k)
	}
	b.WriteString("!")
	for _, t := range taints {
		fmt.Fprintf(&b, "%q=%q:%q ", t.Key, t.Value, t.Effect)
	}
	return b.String()
}

// bestShapes returns at most api.MaxShapes of shapes, the largest first (see
// compareShapes); nil if there is none.
func bestShapes(shapes []corev1.ResourceList) []corev1.ResourceList {
	if len(shapes) == 0 {
		return nil
	}
	sorted := slices.Clone(shapes)
	slices.SortStableFunc(sorted, compareShapes)
	return slices.Clip(sorted[:min(len(sorted), api.MaxShapes)])
}

// compareShapes orders shapes by cpu descending, then memory descending,
// then every other resource descending by name, then by canonical text, so
// that the order never depends on the order of the input.
func compareShapes(a, b corev1.ResourceList) int {
	if c := cmpResource(b, a, corev1.ResourceCPU); c != 0 {
		return c
	}
	if c := cmpResource(b, a, corev1.ResourceMemory); c != 0 {
		return c
	}
	for _, name := range sortedNames(a, b) {
		if c := cmpResource(b, a, name); c != 0 {
			return c
		}
	}
	return strings.Compare(text(a), text(b))
}
