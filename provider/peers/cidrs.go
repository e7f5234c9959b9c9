package peers

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
)

// CIDR arithmetic of the peers' routes (go4.org/netipx), and the events of
// this cluster's own nodes, whose pod CIDRs it carries.

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

// OwnNodeEvents refreshes what this cluster carries when a node of its own
// (not a child's virtual node) comes, goes or changes its pod CIDRs.
func (t *Peers) OwnNodeEvents(ctx context.Context) cache.ResourceEventHandler {
	own := func(obj any) (*corev1.Node, bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		n, ok := obj.(*corev1.Node)
		return n, ok && n.Labels[api.LabelCluster] == ""
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if _, ok := own(obj); ok {
				t.refresh(ctx)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := own(oldObj)
			n, ok2 := own(newObj)
			if ok1 && ok2 && !slices.Equal(nodePodCIDRs(o), nodePodCIDRs(n)) {
				t.refresh(ctx)
			}
		},
		DeleteFunc: func(obj any) {
			if _, ok := own(obj); ok {
				t.refresh(ctx)
			}
		},
	}
}
