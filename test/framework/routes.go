package framework

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/nestlet/nestlet/launcher"
)

// GatewayRoutes returns the IPv4 routes through the gateway's interface
// (nestlet0) on the host of c, and `ip route`'s output as it printed them.
func GatewayRoutes(ctx context.Context, c *launcher.Cluster) ([]netip.Prefix, string, error) {
	out, err := exec.CommandContext(ctx, "ip", "-n", c.Host.Netns, "-4", "route", "show", "dev", "nestlet0").CombinedOutput()
	if err != nil {
		return nil, string(out), fmt.Errorf("ip route on %s's host: %w: %s", c.Name, err, out)
	}
	var routes []netip.Prefix
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		r, err := netip.ParsePrefix(f[0])
		if err != nil {
			a, aerr := netip.ParseAddr(f[0])
			if aerr != nil {
				continue
			}
			r = netip.PrefixFrom(a, a.BitLen())
		}
		routes = append(routes, r.Masked())
	}
	return routes, string(out), nil
}

// Covers reports whether each of cidrs is inside one of routes.
func Covers(routes []netip.Prefix, cidrs ...string) bool {
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return false
		}
		p = p.Masked()
		inside := false
		for _, r := range routes {
			if r.Bits() <= p.Bits() && r.Contains(p.Addr()) {
				inside = true
				break
			}
		}
		if !inside {
			return false
		}
	}
	return true
}
