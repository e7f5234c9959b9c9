package summary

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantities are added and subtracted with resource.Quantity arithmetic,
// which is exact. A quantity is always copied before it changes: Add and Sub
// work in place and may share their decimal with the quantity they were
// copied from, which could belong to an input.

// AddTo adds every quantity of b to a, in place. a must not be nil.
func AddTo(a, b corev1.ResourceList) {
	for name, q := range b {
		sum := a[name].DeepCopy()
		sum.Add(q)
		a[name] = sum
	}
}

// subClamped returns, for every resource of have, have minus used clamped at
// zero. Resources only in used are left out: nothing of them is there to
// advertise.
func subClamped(have, used corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(have))
	for name, q := range have {
		left := q.DeepCopy()
		if u, ok := used[name]; ok {
			left.Sub(u)
		}
		if left.Sign() < 0 {
			left = *resource.NewQuantity(0, q.Format)
		}
		out[name] = left
	}
	return out
}

// cmpResource compares the amounts of name in a and b, a missing one being
// zero.
func cmpResource(a, b corev1.ResourceList, name corev1.ResourceName) int {
	qa := a[name]
	return qa.Cmp(b[name])
}

// text is a canonical rendering of l, sorted by resource name.
func text(l corev1.ResourceList) string {
	var b strings.Builder
	for _, name := range sortedNames(l) {
		q := l[name]
		b.WriteString(string(name) + "=" + q.String() + ",")
	}
	return b.String()
}

// sortedNames returns the resource names of lists, sorted and unique.
func sortedNames(lists ...corev1.ResourceList) []corev1.ResourceName {
	var names []corev1.ResourceName
	for _, l := range lists {
		for name := range l {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// scale returns every quantity of l times percent/100, rounded down: CPU
// to the millicore, other resources to the unit.
func scale(l corev1.ResourceList, percent int) corev1.ResourceList {
	out := make(corev1.ResourceList, len(l))
	for name, q := range l {
		if name == corev1.ResourceCPU {
			out[name] = *resource.NewMilliQuantity(q.MilliValue()*int64(percent)/100, q.Format)
			continue
		}
		out[name] = *resource.NewQuantity(q.Value()*int64(percent)/100, q.Format)
	}
	return out
}
