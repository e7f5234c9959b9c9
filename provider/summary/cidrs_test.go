package summary

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func TestMergePrefixes(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		max  int
		want []string
	}{
		{name: "contained dropped, duplicates too", in: []string{"10.244.1.0/24", "10.244.0.0/16", "10.244.1.0/24"}, max: 16, want: []string{"10.244.0.0/16"}},
		{name: "sibling halves joined, repeatedly", in: []string{"10.0.3.0/24", "10.0.0.0/24", "10.0.2.0/24", "10.0.1.0/24"}, max: 16, want: []string{"10.0.0.0/22"}},
		{name: "apart stay apart", in: []string{"10.0.0.0/24", "10.0.2.0/24"}, max: 16, want: []string{"10.0.0.0/24", "10.0.2.0/24"}},
		{name: "over the bound: closest neighbours share a supernet", in: []string{"10.0.0.0/24", "10.0.2.0/24", "192.168.0.0/24"}, max: 2,
			want: []string{"10.0.0.0/22", "192.168.0.0/24"}},
		{name: "families never mix", in: []string{"10.0.0.0/24", "fd00::/64"}, max: 1, want: []string{"10.0.0.0/24", "fd00::/64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MergePrefixes(prefixes(tt.in...), tt.max)
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			require.Equal(t, tt.want, s)
			// Whatever was merged, every input is still covered.
			for _, in := range prefixes(tt.in...) {
				covered := false
				for _, p := range got {
					covered = covered || (p.Contains(in.Addr()) && p.Bits() <= in.Bits())
				}
				require.True(t, covered, "%s not covered by %v", in, got)
			}
		})
	}
}

func TestMergePrefixesBounded(t *testing.T) {
	var many []netip.Prefix
	for i := range 1000 {
		many = append(many, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i / 128), byte(i % 128 * 2), 0}), 24))
	}
	require.LessOrEqual(t, len(MergePrefixes(many, api.MaxPodCIDRs)), api.MaxPodCIDRs)
}

func TestOverlaps(t *testing.T) {
	require.Equal(t, [][2]string{{"10.244.0.0/16", "10.244.3.0/24"}}, Overlaps([]string{"10.244.0.0/16", "10.128.0.0/24"}, []string{"10.244.3.0/24", "10.129.0.0/24"}))
	require.Empty(t, Overlaps([]string{"10.0.0.0/24"}, []string{"10.0.1.0/24", "bad"}))
}

func TestSummaryPodCIDRs(t *testing.T) {
	withCIDR := func(c string) nodeOpt {
		return func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = c, []string{c} }
	}
	nodes := []*corev1.Node{
		newNode("a", rl("cpu", "1"), withCIDR("10.244.0.0/24")),
		newNode("b", rl("cpu", "1"), withCIDR("10.244.1.0/24")),
		newNode("x", rl("cpu", "1"), virtualOf(t, api.Summary{Cluster: "x", Covered: []string{"x"}, PodCIDRs: []string{"10.250.0.0/16"}})),
		newNode("y", rl("cpu", "1"), virtualOf(t, api.Summary{Cluster: "y", Covered: []string{"p", "y"}, PodCIDRs: []string{"10.99.0.0/16"}})),
	}
	got := Compute(Input{Cluster: "c", Parent: "p", Nodes: nodes})
	require.Equal(t, []string{"10.244.0.0/23", "10.250.0.0/16"}, got.Summary.PodCIDRs, "y covers the parent: left out")
}

// A child's claim climbs only as far as its parent grants it: the summary
// carries up what ChildPodCIDRs says of each child's node, nothing of one
// not decided yet, nothing of a node with a summary it does not know as a
// child's, nothing of a child's node without a summary (whatever its spec
// says), and the real nodes' pod CIDRs as they are.
func TestSummaryPodCIDRsCarryOnlyWhatIsGranted(t *testing.T) {
	withCIDR := func(c string) nodeOpt {
		return func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = c, []string{c} }
	}
	nodes := []*corev1.Node{
		newNode("a", rl("cpu", "1"), withCIDR("10.244.0.0/24")),
		newNode("x", rl("cpu", "1"), virtualOf(t, api.Summary{Cluster: "x", Covered: []string{"x"}, PodCIDRs: []string{"0.0.0.0/1", "128.0.0.0/1"}})),
		newNode("z", rl("cpu", "1"), virtualOf(t, api.Summary{Cluster: "z", Covered: []string{"z"}, PodCIDRs: []string{"10.9.0.0/16"}})),
		newNode("unknown", rl("cpu", "1"), virtualOf(t, api.Summary{Cluster: "u", Covered: []string{"u"}, PodCIDRs: []string{"10.8.0.0/16"}})),
		newNode("nosummary", rl("cpu", "1"), withCIDR("10.0.0.0/8")),
	}
	child := func(n *corev1.Node) ([]string, bool) {
		switch n.Name {
		case "x":
			return []string{"10.250.0.0/24"}, true
		case "z", "nosummary":
			return nil, true
		}
		return nil, false
	}
	in := Input{Cluster: "c", Parent: "p", Nodes: nodes, ChildPodCIDRs: child}
	got := Compute(in)
	require.Equal(t, []string{"10.244.0.0/24", "10.250.0.0/24"}, got.Summary.PodCIDRs, "x's grant, not its claim; z not decided yet")
	require.Equal(t, got.Summary.PodCIDRs, PodCIDRs(in))
}
