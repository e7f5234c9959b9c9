package peers

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// The nodes' own packets take the first address of the first IPv4 pod CIDR
// of the cluster's own nodes; every source the peers carry, and those pod
// CIDRs, are kept; a cluster without a pod CIDR of its own translates
// nothing.
func TestPlanNodeSource(t *testing.T) {
	p := netip.MustParsePrefix
	plan, ok := planNodeSource([]netip.Prefix{p("10.255.1.0/24"), p("fd00::/64"), p("10.255.0.0/24")},
		[]netip.Prefix{p("10.251.0.5/32"), p("10.255.8.0/21"), p("10.255.0.0/24")})
	require.True(t, ok)
	require.Equal(t, netip.MustParseAddr("10.255.0.1"), plan.to)
	require.Equal(t, []netip.Prefix{p("10.251.0.5/32"), p("10.255.0.0/24"), p("10.255.1.0/24"), p("10.255.8.0/21"), p("fd00::/64")}, plan.keep)

	_, ok = planNodeSource(nil, []netip.Prefix{p("10.255.8.0/21")})
	require.False(t, ok, "no node of its own")
	_, ok = planNodeSource([]netip.Prefix{p("fd00::/64"), p("10.0.0.4/31")}, nil)
	require.False(t, ok, "no IPv4 pod CIDR with a host address")
}
