package peers

import (
	"net/netip"
	"slices"
	"strings"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
)

// CIDR arithmetic of the peers' routes (go4.org/netipx).

// subtract returns the addresses of ps that none of minus holds, as the
// fewest prefixes (go4.org/netipx), in order; nil when none.
func subtract(ps, minus []netip.Prefix) []netip.Prefix {
	var b netipx.IPSetBuilder
	for _, p := range ps {
		b.AddPrefix(p.Masked())
	}
	for _, p := range minus {
		b.RemovePrefix(p.Masked())
	}
	set, err := b.IPSet()
	if err != nil {
		return nil
	}
	return set.Prefixes()
}

// nodePodCIDRs returns a node's spec.podCIDRs (or its podCIDR).
func nodePodCIDRs(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

// prefixes parses CIDRs, masked, skipping what does not parse.
func prefixes(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
