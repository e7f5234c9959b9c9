package tree

import (
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestChildrenBehindNAT: every child's host refuses new connections from
// every host but its own children's (its parent's, the root's, its
// siblings', its nephews'), on its API
// server's port and on every port its agent listens on, while this machine
// (the operator) reaches them and every child reaches its parent: the
// journeys of this package go through the connections the children open.
func TestChildrenBehindNAT(t *testing.T) {
	framework.NeedRealNodes(t)
	require.Equal(t, launcher.NetworkHosts, env.Network, "this package runs on hosts")
	dial := func(fromNetns, to string, port int) error {
		return framework.DialFrom(t.Context(), fromNetns, net.JoinHostPort(to, strconv.Itoa(port)), 2*time.Second)
	}
	apiPort := func(name string) int {
		u, err := url.Parse(env.Cluster(name).URL)
		require.NoError(t, err)
		port, err := strconv.Atoi(u.Port())
		require.NoError(t, err)
		return port
	}
	parentOf := map[string]string{}
	for _, e := range topo.Edges() {
		parentOf[e[0]] = e[1]
	}
	// Every check at once: a refused connection takes the dial's timeout.
	type check struct {
		from, what string
		ns, ip     string
		port       int
		open       bool
	}
	var checks []check
	for _, e := range topo.Edges() {
		child := env.Cluster(e[0])
		ports := []int{apiPort(e[0])}
		agents := 0
		for _, p := range env.Processes() {
			if p.Name == child.Name+"-nestlet" || p.Name == child.Name+"-nestlet-proxy" {
				listening, err := framework.ListeningTCPPorts(p)
				require.NoError(t, err)
				ports = append(ports, listening...)
				agents++
			}
		}
		require.NotZero(t, agents, "no agent of %s", child.Name)
		for _, port := range ports {
			checks = append(checks, check{from: "this machine", what: child.Name, ip: child.Host.IP, port: port, open: true})
			for _, other := range env.Clusters() {
				if other.Name == child.Name || parentOf[other.Name] == child.Name {
					continue // its own children reach it: their parent
				}
				checks = append(checks, check{from: other.Name, what: child.Name, ns: other.Host.Netns, ip: child.Host.IP, port: port})
			}
		}
		parent := env.Cluster(parentOf[child.Name])
		checks = append(checks, check{from: child.Name, what: parent.Name, ns: child.Host.Netns, ip: parent.Host.IP, port: apiPort(parent.Name), open: true})
	}
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { errs[i] = dial(c.ns, c.ip, c.port) })
	}
	wg.Wait()
	for i, c := range checks {
		if c.open {
			require.NoError(t, errs[i], "%s cannot reach %s:%d of %s: the refusals checked would prove nothing", c.from, c.ip, c.port, c.what)
		} else {
			require.Error(t, errs[i], "%s's host opened a connection to %s:%d of %s", c.from, c.ip, c.port, c.what)
		}
	}
	t.Logf("%d connections checked", len(checks))
}
