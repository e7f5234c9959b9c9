package launcher

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNextPodCIDRDistinct(t *testing.T) {
	within := netip.MustParsePrefix(PodCIDRRange)
	seen := map[string]bool{}
	for range 600 {
		c, err := nextPodCIDR()
		require.NoError(t, err)
		p := netip.MustParsePrefix(c)
		require.Equal(t, 24, p.Bits())
		require.True(t, within.Contains(p.Addr()), c)
		require.False(t, seen[c], "handed out twice: %s", c)
		seen[c] = true
	}
}
