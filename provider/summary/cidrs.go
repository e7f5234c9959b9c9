package summary

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

// PodCIDRs returns, without looking at pods, what Compute's summary would
// say of the subtree's pod CIDRs (Summary.PodCIDRs).
func PodCIDRs(in Input) []string {
	return podCIDRs(countNodes(in.Nodes, in.Parent), in.ChildPodCIDRs)
}

// podCIDRs returns the pod CIDRs of the counted subtree (real nodes'
// spec.podCIDRs, virtual nodes' summaries, or what child says this cluster
// grants its children's nodes), merged into at most api.MaxPodCIDRs
// covering prefixes.
func podCIDRs(nodes []counted, child func(*corev1.Node) ([]string, bool)) []string {
	var prefixes []netip.Prefix
	add := func(s string) {
		if p, err := netip.ParsePrefix(s); err == nil {
			prefixes = append(prefixes, p.Masked())
		}
	}
	for _, c := range nodes {
		if child != nil {
			if granted, isChild := child(c.node); isChild || c.summary != nil {
				for _, s := range granted {
					add(s)
				}
				continue
			}
		}
		if c.summary != nil {
			for _, s := range c.summary.PodCIDRs {
				add(s)
			}
			continue
		}
		for _, s := range c.node.Spec.PodCIDRs {
			add(s)
		}
		if len(c.node.Spec.PodCIDRs) == 0 && c.node.Spec.PodCIDR != "" {
			add(c.node.Spec.PodCIDR)
		}
	}
	merged := MergePrefixes(prefixes, api.MaxPodCIDRs)
	if len(merged) == 0 {
		return nil
	}
	out := make([]string, len(merged))
	for i, p := range merged {
		out[i] = p.String()
	}
	return out
}

// MergePrefixes returns the smallest set of prefixes covering ps (contained
// prefixes dropped, sibling halves joined), sorted; while more than max
// are left, the two closest neighbours of one address family are replaced
// by their common supernet, which covers more than they did.
func MergePrefixes(ps []netip.Prefix, max int) []netip.Prefix {
	out := normalize(ps)
	for len(out) > max {
		best, bestBits := -1, -1
		for i := 0; i+1 < len(out); i++ {
			if out[i].Addr().Is4() != out[i+1].Addr().Is4() {
				continue
			}
			if b := commonBits(out[i], out[i+1]); b > bestBits {
				best, bestBits = i, b
			}
		}
		if best < 0 {
			break // one prefix per family: nothing to join
		}
		super, _ := out[best].Addr().Prefix(bestBits)
		out = normalize(append(slices.Delete(out, best, best+2), super))
	}
	return out
}

// normalize sorts ps, drops prefixes inside others and joins sibling
// halves, until nothing changes.
func normalize(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	for {
		slices.SortFunc(out, comparePrefix)
		out = slices.Compact(out)
		changed := false
		kept := out[:0]
		for _, p := range out {
			if n := len(kept); n > 0 && kept[n-1].Overlaps(p) {
				changed = true // sorted: the earlier, shorter one contains p
				continue
			}
			if n := len(kept); n > 0 && siblings(kept[n-1], p) {
				kept[n-1], _ = p.Addr().Prefix(p.Bits() - 1)
				changed = true
				continue
			}
			kept = append(kept, p)
		}
		out = kept
		if !changed {
			return out
		}
	}
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// siblings tells whether a and b are the two halves of one prefix.
func siblings(a, b netip.Prefix) bool {
	if a.Bits() != b.Bits() || a.Bits() == 0 || a.Addr().Is4() != b.Addr().Is4() {
		return false
	}
	pa, _ := a.Addr().Prefix(a.Bits() - 1)
	pb, _ := b.Addr().Prefix(b.Bits() - 1)
	return pa == pb && a != b
}

// commonBits is the length of the longest prefix a and b share.
func commonBits(a, b netip.Prefix) int {
	n := min(a.Bits(), b.Bits())
	for ; n > 0; n-- {
		pa, _ := a.Addr().Prefix(n)
		pb, _ := b.Addr().Prefix(n)
		if pa == pb {
			return n
		}
	}
	return 0
}

// Overlaps returns the pairs of prefixes of a and b that overlap, as
// "x overlaps y".
func Overlaps(a, b []string) [][2]string {
	var out [][2]string
	for _, sa := range a {
		pa, err := netip.ParsePrefix(sa)
		if err != nil {
			continue
		}
		for _, sb := range b {
			if pb, err := netip.ParsePrefix(sb); err == nil && pa.Overlaps(pb) {
				out = append(out, [2]string{sa, sb})
			}
		}
	}
	return out
}
