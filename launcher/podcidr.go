package launcher

import (
	"fmt"
	"net/netip"
	"sync"
)

// Pod CIDRs of simulated nodes. Clusters that are meant to be joined need
// pod CIDRs that do not overlap, as real ones would (an endpoint at the
// root must name one pod): every node this process creates gets its own
// /24 of PodCIDRRange, which kwok hands its pods' IPs out of. The range is
// far from ServiceCIDR and from kwok's own default.
const PodCIDRRange = "10.128.0.0/9"

var podCIDRs struct {
	sync.Mutex
	next int
}

// nextPodCIDR returns a /24 of PodCIDRRange that this process has not
// handed out before.
func nextPodCIDR() (string, error) {
	podCIDRs.Lock()
	defer podCIDRs.Unlock()
	base := netip.MustParsePrefix(PodCIDRRange)
	const per = 1 << (24 - 9) // /24s in the /9
	if podCIDRs.next >= per {
		return "", fmt.Errorf("all %d pod CIDRs of %s are taken", per, PodCIDRRange)
	}
	b := base.Addr().As4()
	n := podCIDRs.next
	podCIDRs.next++
	b[1] += byte(n >> 8)
	b[2] = byte(n)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24).String(), nil
}
