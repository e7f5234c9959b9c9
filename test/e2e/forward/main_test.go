// Package forward tests recursive pod forwarding on a 3-level tree of real
// control planes:
//
//	root <- east, west          (root has one real node, no region)
//	east <- east-1, east-2      (kwok nodes, region east)
//	west <- west-1, west-2      (kwok nodes, region west)
package forward

import (
	"os"
	"testing"
	"time"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var (
	env        *launcher.Environment
	targetOf   map[string]string
	metricsURL map[string]string
)

// kwokGrace: the leaves' controller managers wait 2 minutes (not 50 s)
// for kwok's node heartbeats. BenchmarkThroughput1000 saturates both cores
// for about a minute; with the default, every leaf's kwok nodes went
// Unknown ("Kubelet stopped posting node status") and back during the run,
// and marking their pods NotReady and back doubled the tree's pod status
// writes. Kubelets on their own machines do not starve like this.
var kwokGrace = []string{"--node-monitor-grace-period=2m"}

func leaf(name, region string) launcher.ClusterOptions {
	node := func(suffix, zone string) launcher.NodeOptions {
		return launcher.NodeOptions{Name: name + "-" + suffix, Labels: map[string]string{
			"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone}}
	}
	return launcher.ClusterOptions{Name: name, Nodes: []launcher.NodeOptions{node("a", name+"-a"), node("b", name+"-b")},
		ControllerManagerArgs: kwokGrace}
}

// heldMaxAge is the agents' --held-max-age: a place held for a parent's
// pod not asked for again in that long is collected (TestWaitForRoom
// waits past it).
const heldMaxAge = 45 * time.Second

func TestMain(m *testing.M) {
	clusters := []launcher.ClusterOptions{
		{Name: "root", Nodes: []launcher.NodeOptions{{Name: "root-node"}}}, {Name: "east"}, {Name: "west"},
		leaf("east-1", "east"), leaf("east-2", "east"), leaf("west-1", "west"), leaf("west-2", "west"),
	}
	// The benchmarks record the API servers' and the schedulers' CPU
	// profiles too with NESTLET_PROFILE_DIR set.
	for i := range clusters {
		clusters[i].Profiling = os.Getenv("NESTLET_PROFILE_DIR") != ""
		clusters[i].SchedulerMetrics = clusters[i].Profiling
	}
	os.Exit(framework.RunTreeMain(m, framework.Tree{
		Clusters: clusters,
		Edges: [][2]string{
			{"east", "root"}, {"west", "root"},
			{"east-1", "east"}, {"east-2", "east"}, {"west-1", "west"}, {"west-2", "west"},
		},
		JoinArgs: []string{"--report-frequency=3s"},
		// east-1 can grow (as under a cluster autoscaler), and east passes
		// its waiting pods on: TestWaitForRoom.
		EdgeJoinArgs: map[[2]string][]string{{"east-1", "east"}: {"--wait-for-room"}, {"east", "root"}: {"--wait-for-room"}},
		// --profiling: BenchmarkForwardingLatency records the agents' CPU
		// profiles with NESTLET_PROFILE_DIR set.
		AgentArgs: []string{"--bounce-timeout=10s", "--profiling", "--held-max-age=" + heldMaxAge.String(), "--namespace-idle=" + namespaceIdle.String()},
		Metrics:   true,
	}, func(te *framework.TreeEnv) { env, targetOf, metricsURL = te.Environment, te.Targets, te.MetricsURL }))
}
