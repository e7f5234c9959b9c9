package summary

import (
	corev1 "k8s.io/api/core/v1"
)

// parentUse is what the parent's own pods request here: the load of the
// counted nodes less the foreign pods'.
func parentUse(l load) corev1.ResourceList {
	used := corev1.ResourceList{}
	for _, u := range l.perNode {
		AddTo(used, u)
	}
	return subClamped(used, l.foreign)
}

// limitTo caps r at limits (Target spec.limits): the virtual node's
// allocatable and every group's allocatable at the limit, and what is
// free in a group, and in each of its shapes, at what the limit leaves
// beside the parent's pods here (use). The parent's scheduler, which
// counts its pods against the node's allocatable, then places no more
// than the limit.
func limitTo(r *Result, limits, use corev1.ResourceList) {
	if len(limits) == 0 {
		return
	}
	left := subClamped(limits, use)
	r.Allocatable = capped(r.Allocatable, limits)
	for i := range r.Summary.Groups {
		g := &r.Summary.Groups[i]
		g.Allocatable = capped(g.Allocatable, limits)
		g.Free = capped(g.Free, left)
		for j := range g.Shapes {
			g.Shapes[j] = capped(g.Shapes[j], left)
		}
	}
}

// capped returns l with every resource that limits names at most its
// limit; resources limits does not name are kept.
func capped(l, limits corev1.ResourceList) corev1.ResourceList {
	out := l.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	for name, limit := range limits {
		if q, ok := out[name]; ok && q.Cmp(limit) > 0 {
			out[name] = limit.DeepCopy()
		}
	}
	return out
}
