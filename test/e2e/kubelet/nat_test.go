package kubelet

import (
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestChildrenBehindNAT: no parent (nor any other host) opens a connection
// to a child's host, on its API server's port nor on any port its agent or
// its nestlet-proxy listens on, while the child reaches its parent and this machine (the
// operator) reaches both: every journey of this package works through the
// connections the children open. West, whose host admits the root's for
// direct mode, is the one exception, and still refuses its sibling.
func TestChildrenBehindNAT(t *testing.T) {
	if env.Network != launcher.NetworkHosts {
		t.Fatalf("this package runs on hosts (%s=%s), not %s", launcher.NetworkEnv, launcher.NetworkHosts, env.Network)
	}
	nestlet := map[string][]*launcher.Process{}
	for _, p := range env.Processes() {
		for _, c := range env.Clusters() {
			if p.Name == c.Name+"-nestlet" || p.Name == c.Name+"-nestlet-proxy" {
				nestlet[c.Name] = append(nestlet[c.Name], p)
			}
		}
	}
	portsOf := func(child string) []int {
		c := env.Cluster(child)
		u, err := url.Parse(c.URL)
		require.NoError(t, err)
		api, err := strconv.Atoi(u.Port())
		require.NoError(t, err)
		ports := []int{api}
		require.NotEmpty(t, nestlet[child], "no agent of %s", child)
		for _, p := range nestlet[child] {
			listening, err := framework.ListeningTCPPorts(p)
			require.NoError(t, err)
			ports = append(ports, listening...)
		}
		return ports
	}
	dial := func(fromNetns, to string, port int) error {
		return framework.DialFrom(t.Context(), fromNetns, net.JoinHostPort(to, strconv.Itoa(port)), 2*time.Second)
	}
	host := func(name string) *launcher.Host { return env.Cluster(name).Host }

	for _, edge := range [][2]string{{"east", "root"}, {"east-1", "east"}, {"east-1", "root"}, {"west", "east"}, {"east", "west"}} {
		child, other := host(edge[0]), host(edge[1])
		for _, port := range portsOf(edge[0]) {
			// Open: the operator reaches it...
			require.NoError(t, dial("", child.IP, port), "this machine cannot reach %s:%d of %s: the check below would prove nothing", child.IP, port, edge[0])
			// ...but not the other host.
			require.Error(t, dial(other.Netns, child.IP, port), "%s's host opened a connection to %s's %s:%d", edge[1], edge[0], child.IP, port)
		}
	}
	// The children reach their parents.
	for _, edge := range [][2]string{{"east", "root"}, {"east-1", "east"}, {"west", "root"}} {
		u, err := url.Parse(env.Cluster(edge[1]).URL)
		require.NoError(t, err)
		port, err := strconv.Atoi(u.Port())
		require.NoError(t, err)
		require.NoError(t, dial(host(edge[0]).Netns, host(edge[1]).IP, port), "%s cannot reach its parent %s", edge[0], edge[1])
	}
	// West admits the root (direct mode), so the NAT above is the
	// firewall, not a port nobody listens on.
	for _, port := range portsOf("west") {
		require.NoError(t, dial(host("root").Netns, host("west").IP, port), "the root cannot reach west:%d, which admits it", port)
	}
}
