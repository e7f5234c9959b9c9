// Package kubelet tests the kubelet API through the levels (kubectl logs,
// exec, attach, port-forward from the root) on real control planes:
//
//	root  (nestlet-proxy) <- east (tunnel), west (direct mode)
//	east  (nestlet-proxy) <- east-1 (tunnel; kwok node, region east)
//	west                     kwok node, region west
//
// A pod pinned to region east runs two levels down, in east-1, and every
// request for it goes root API server -> root proxy -> east's tunnel ->
// east's API server -> east proxy -> east-1's tunnel -> east-1's API
// server -> kwok. A pod pinned to west runs one level down, reached
// directly on west's agent.
//
// Every cluster is a host of its own; east and east-1 are behind NAT and
// reached only through the tunnels they open, west's host admits the
// root's (the one reachable child, for direct mode).
package kubelet

import (
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var (
	env      *launcher.Environment
	targetOf map[string]string
	tree     framework.Tree
	// proxyArgs gives a proxy's arguments in the tree, to restart one.
	proxyArgs func(cluster string) []string
	echoAddr  string
)

func TestMain(m *testing.M) {
	// kwok connects every port-forward to this echo server, on this
	// machine's address on the WAN, where every host reaches it.
	if err := launcher.EnsureWAN(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	l, err := net.Listen("tcp", launcher.OperatorIP()+":0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	echoAddr = l.Addr().String()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	node := func(name, region string) []launcher.NodeOptions {
		return []launcher.NodeOptions{{Name: name, Labels: map[string]string{"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": name}}}
	}
	tree = framework.Tree{
		Clusters: []launcher.ClusterOptions{
			{Name: "root"}, {Name: "east"},
			{Name: "east-1", Nodes: node("east-1-a", "east"), KwokPortForwardTarget: echoAddr},
			{Name: "west", Nodes: node("west-a", "west"), KwokPortForwardTarget: echoAddr},
		},
		Edges:    [][2]string{{"east", "root"}, {"east-1", "east"}, {"west", "root"}},
		JoinArgs: []string{"--report-frequency=3s"},
		Proxies:  []string{"root", "east"},
		ClusterAgentArgs: map[string][]string{
			"west": {"--kubelet-api=direct", "--kubelet-direct-address=" + framework.ClusterAddress},
		},
		// West serves its kubelet API directly: its host admits the
		// root's, as an operator makes such a child reachable.
		Reachable: [][2]string{{"root", "west"}},
	}
	code := framework.RunTreeMain(m, tree, func(te *framework.TreeEnv) { env, targetOf, proxyArgs = te.Environment, te.Targets, te.ProxyArgs })
	_ = l.Close()
	os.Exit(code)
}
