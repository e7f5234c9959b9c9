package summary

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

// maxGroups is how many groups a summary keeps before folding a key, once
// it has outgrown api.MaxSummaryBytes.
const maxGroups = 16

// maxValues is the most values a folded key lists per group, before fewer
// are tried.
const maxValues = 32

// bound keeps s within api.MaxSummaryBytes whatever the size and shape of
// the subtree, by steps that each lose less than the next, until it fits:
//
//  1. while there are more than maxGroups groups, fold the group key with
//     the most distinct values (one zone per cluster, say): its groups
//     merge, and each merged group lists how many of its nodes carry each
//     value (api.Group.Values);
//  2. list fewer values per folded key (32, 16, ... 0), the values with the
//     fewest nodes going to api.Group.Others;
//  3. fold the other keys, one at a time, and last the keys that some
//     groups have folded (by a child) and the others lack, so that they
//     merge;
//  4. merge groups that differ by their taints, keeping the taints common
//     to all;
//  5. keep one free shape per group.
//
// Totals (nodes, allocatable, free) stay exact through every step, and so
// does whether a label value is present while it is listed; what is lost
// is how the capacity splits between the merged groups. A pod that
// selects a folded value may therefore be sent to a child with room for
// it only under another value: it fits nowhere there and comes back
// (bounce-back), as when the capacity went between two reports.
func bound(s *api.Summary) {
	limit := -1 // values listed per folded key; -1: not capped yet
	for size(s) > api.MaxSummaryBytes {
		switch {
		case len(s.Groups) > maxGroups && foldOne(s):
		case limit != 0:
			limit = nextLimit(limit)
			capValues(s.Groups, limit)
		case foldOne(s):
			capValues(s.Groups, limit)
		case mergeTaints(s):
		case cutShapes(s):
		default:
			return // nothing left to fold: the group keys themselves are too long
		}
	}
}

func nextLimit(limit int) int {
	if limit < 0 {
		return maxValues
	}
	return limit / 2
}

// size is the length of s as JSON.
func size(s *api.Summary) int {
	b, err := json.Marshal(s)
	if err != nil {
		return 0
	}
	return len(b)
}

// foldOne folds the group key, not folded everywhere yet, with the most
// distinct values over the groups (the later key on a tie); false if no
// key is left to fold. A key no group carries as a label, but that some
// groups have folded (by a child) and others lack, counts as no value: it
// is folded after the others, and then those groups can merge.
func foldOne(s *api.Summary) bool {
	best, bestValues := "", -1
	for _, k := range s.GroupKeys {
		values := map[string]bool{}
		folded, lacking := false, false
		for _, g := range s.Groups {
			_, inOthers := g.Others[k]
			switch v, ok := g.Labels[k]; {
			case ok:
				values[v] = true
			case inOthers || g.Values[k] != nil:
				folded = true
			default:
				lacking = true // nodes without the key: folding lists them in Others
			}
		}
		if (len(values) > 0 || folded && lacking) && len(values) >= bestValues {
			best, bestValues = k, len(values)
		}
	}
	if bestValues < 0 {
		return false
	}
	byID := map[string]*api.Group{}
	for _, g := range s.Groups {
		g.Labels = maps.Clone(g.Labels)
		g.Values, g.Others = cloneValues(g.Values), maps.Clone(g.Others)
		if g.Values == nil {
			g.Values = map[string]map[string]int{}
		}
		if g.Others == nil {
			g.Others = map[string]int{}
		}
		if v, ok := g.Labels[best]; ok {
			delete(g.Labels, best)
			if g.Values[best] == nil {
				g.Values[best] = map[string]int{}
			}
			g.Values[best][v] += g.Nodes
		} else if _, folded := g.Others[best]; !folded && g.Values[best] == nil {
			// Nodes without the key; a group that has it folded already
			// counts every node of its own.
			g.Others[best] += g.Nodes
		}
		mergeInto(byID, idOf(g), g)
	}
	s.Groups = finish(byID)
	return true
}

// capValues lists at most limit values per folded key and group, those
// with the most nodes (then the first by name); the others' nodes go to
// Others.
func capValues(groups []api.Group, limit int) {
	for i := range groups {
		g := &groups[i]
		for k, vs := range g.Values {
			if len(vs) <= limit {
				continue
			}
			keys := slices.SortedFunc(maps.Keys(vs), func(a, b string) int { return cmp.Or(cmp.Compare(vs[b], vs[a]), cmp.Compare(a, b)) })
			kept := map[string]int{}
			for j, v := range keys {
				if j < limit {
					kept[v] = vs[v]
					continue
				}
				if g.Others == nil {
					g.Others = map[string]int{}
				}
				g.Others[k] += vs[v]
			}
			g.Values[k] = kept
			if limit == 0 {
				delete(g.Values, k)
			}
		}
	}
}

// mergeTaints merges every group into those that differ only by taints,
// with the taints all of them share; false if no two groups differ only
// by taints.
func mergeTaints(s *api.Summary) bool {
	byID := map[string]*api.Group{}
	for _, g := range s.Groups {
		id := groupID(g.Labels, nil, g.FoldedKeys())
		if prev, ok := byID[id]; ok {
			prev.Taints = commonTaints(prev.Taints, g.Taints)
		}
		mergeInto(byID, id, g)
	}
	if len(byID) == len(s.Groups) {
		return false
	}
	s.Groups = finish(byID)
	return true
}

func commonTaints(a, b []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range a {
		if slices.Contains(b, t) {
			out = append(out, t)
		}
	}
	return out
}

// cutShapes keeps one shape per group; false if none has more.
func cutShapes(s *api.Summary) bool {
	cut := false
	for i := range s.Groups {
		if len(s.Groups[i].Shapes) > 1 {
			s.Groups[i].Shapes, cut = s.Groups[i].Shapes[:1], true
		}
	}
	return cut
}

func cloneValues(v map[string]map[string]int) map[string]map[string]int {
	if v == nil {
		return nil
	}
	out := make(map[string]map[string]int, len(v))
	for k, vs := range v {
		out[k] = maps.Clone(vs)
	}
	return out
}
