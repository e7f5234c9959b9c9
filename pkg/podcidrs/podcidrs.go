// Package podcidrs follows the pod CIDRs a parent grants its children
// (api.PodCIDRGrantsConfigMap), set by the parent's admin (`nestctl grant`,
// `nestctl token create --pod-cidrs`), and does the set arithmetic of
// checking a child's claim against them: a child's summary claims pod
// CIDRs, and only what its parent granted is routed to it, carried up and
// told to its siblings, as node IPAM grants a node its pod CIDR.
package podcidrs

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// Parse reads comma-separated CIDRs ("10.1.0.0/16,fd00:1::/48"), masked,
// in order, without repeats.
func Parse(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%q: want a CIDR, e.g. 10.1.0.0/16", part)
		}
		out = append(out, p.Masked())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CIDR: want comma-separated CIDRs, e.g. 10.1.0.0/16")
	}
	return Sorted(out), nil
}

// Format writes prefixes as Parse reads them.
func Format(ps []netip.Prefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// Strings parses CIDRs as a summary carries them, masked, skipping what
// does not parse.
func Strings(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Sorted returns ps ordered by address then length, without repeats.
func Sorted(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

// Set is a set of addresses (go4.org/netipx).
type Set struct{ s *netipx.IPSet }

// SetOf returns the addresses of ps.
func SetOf(ps ...[]netip.Prefix) Set {
	var b netipx.IPSetBuilder
	for _, list := range ps {
		for _, p := range list {
			b.AddPrefix(p.Masked())
		}
	}
	s, _ := b.IPSet() // an IPSetBuilder errs only on an invalid prefix, skipped
	return Set{s}
}

// Intersect returns the addresses in both s and o.
func (s Set) Intersect(o Set) Set {
	var b netipx.IPSetBuilder
	b.AddSet(s.s)
	b.Intersect(o.s)
	r, _ := b.IPSet()
	return Set{r}
}

// Minus returns the addresses of s that o does not hold.
func (s Set) Minus(o Set) Set {
	var b netipx.IPSetBuilder
	b.AddSet(s.s)
	b.RemoveSet(o.s)
	r, _ := b.IPSet()
	return Set{r}
}

// Union returns the addresses of s and of o.
func (s Set) Union(o Set) Set {
	var b netipx.IPSetBuilder
	b.AddSet(s.s)
	b.AddSet(o.s)
	r, _ := b.IPSet()
	return Set{r}
}

// Empty reports whether s holds no address.
func (s Set) Empty() bool { return s.s == nil || len(s.s.Ranges()) == 0 }

// Prefixes returns s as the fewest prefixes, in order.
func (s Set) Prefixes() []netip.Prefix {
	if s.s == nil {
		return nil
	}
	return s.s.Prefixes()
}

// Size is how many addresses of each family s holds: IPv4, and IPv6 in
// /64s (a node's share), so that both compare with a pool's share.
func (s Set) Size() (v4, v6in64s *big.Int) {
	v4, v6in64s = new(big.Int), new(big.Int)
	for _, p := range s.Prefixes() {
		if p.Addr().Is4() {
			v4.Add(v4, new(big.Int).Lsh(big.NewInt(1), uint(32-p.Bits())))
		} else if p.Bits() <= 64 {
			v6in64s.Add(v6in64s, new(big.Int).Lsh(big.NewInt(1), uint(64-p.Bits())))
		} else {
			v6in64s.Add(v6in64s, big.NewInt(1))
		}
	}
	return v4, v6in64s
}

// Grants holds what the parent's admin granted each child, kept in step
// by an informer on the one ConfigMap. A value that does not parse grants
// nothing (Of returns its error): it does not fall back to the pool.
type Grants struct {
	informer cache.SharedIndexInformer
	onChange func()

	mu      sync.Mutex
	grants  map[string][]netip.Prefix
	invalid map[string]error
}

// NewGrants follows client's grants; onChange (optional) is called after
// each change.
func NewGrants(client kubernetes.Interface, onChange func()) *Grants {
	g := &Grants{grants: map[string][]netip.Prefix{}, onChange: onChange}
	if client != nil {
		g.informer = kubeclient.ConfigMapInformer(client, metav1.NamespaceSystem, api.PodCIDRGrantsConfigMap, g.Set)
	}
	return g
}

// Set makes data the grants (tests call it directly).
func (g *Grants) Set(data map[string]string) {
	grants, invalid := map[string][]netip.Prefix{}, map[string]error{}
	for name, v := range data {
		ps, err := Parse(v)
		if err != nil {
			invalid[name] = fmt.Errorf("pod CIDRs granted to %s in configmap %s/%s: %w", name, metav1.NamespaceSystem, api.PodCIDRGrantsConfigMap, err)
			continue
		}
		grants[name] = ps
	}
	g.mu.Lock()
	g.grants, g.invalid = grants, invalid
	g.mu.Unlock()
	if g.onChange != nil {
		g.onChange()
	}
}

// Of returns what child name was granted: ok is false when it has no key
// (the pool applies); err when its value does not parse (nothing granted).
func (g *Grants) Of(name string) (ps []netip.Prefix, ok bool, err error) {
	if g == nil {
		return nil, false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.invalid[name]; err != nil {
		return nil, true, err
	}
	ps, ok = g.grants[name]
	return ps, ok, nil
}

// All returns every child's grant (those that parse).
func (g *Grants) All() map[string][]netip.Prefix {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string][]netip.Prefix, len(g.grants))
	for k, v := range g.grants {
		out[k] = v
	}
	return out
}

// HasSynced reports whether the ConfigMap was read (always, without a
// client).
func (g *Grants) HasSynced() bool { return g == nil || g.informer == nil || g.informer.HasSynced() }

// Run follows the ConfigMap until ctx ends.
func (g *Grants) Run(ctx context.Context) {
	if g != nil && g.informer != nil {
		g.informer.RunWithContext(ctx)
	}
}

// Record writes ps as what child is granted in client's
// api.PodCIDRGrantsConfigMap (creating it); with ps nil it removes the
// child's grant (the pool applies again).
func Record(ctx context.Context, client kubernetes.Interface, child string, ps []netip.Prefix, fieldManager string) error {
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, api.PodCIDRGrantsConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if ps == nil {
				return nil
			}
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.PodCIDRGrantsConfigMap, Namespace: metav1.NamespaceSystem},
				Data: map[string]string{child: Format(ps)}}, metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), api.PodCIDRGrantsConfigMap, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if ps == nil {
			if _, ok := cm.Data[child]; !ok {
				return nil
			}
			delete(cm.Data, child)
		} else {
			cm.Data[child] = Format(ps)
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the pod CIDRs granted to %s in configmap %s/%s: %w", child, metav1.NamespaceSystem, api.PodCIDRGrantsConfigMap, err)
	}
	return nil
}
