package playground

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkTreeStartup starts the 1 + 2 + 4 tree of `make demo` (its
// topology, a real node in each leaf, a nestlet-proxy in every parent)
// twice in one run, binaries warm: first with every cluster on this
// machine's network (launcher.NetworkShared, the baseline), then with each
// on a host of its own behind NAT (launcher.NetworkHosts, which also runs
// kube-proxy on every real node). It reports the time from nothing to every
// Target Ready, and the memory of each cluster's processes ten seconds later
// (control plane, kwok, agent, proxy; for a leaf also kubelet, containerd
// and kube-proxy; not the containers nor their shims, nor the shared etcd),
// averaged over the seven clusters and over the four leaves.
//
//	make bench BENCH=playground
func BenchmarkTreeStartup(b *testing.B) {
	topo, err := launcher.LoadTopology("")
	if err != nil {
		b.Fatal(err)
	}
	rt, err := launcher.FindNodeRuntime("")
	if err == nil {
		err = launcher.CheckRealNodes(rt)
	}
	if err != nil {
		b.Skipf("the demo's tree needs real nodes: %v", err)
	}
	for b.Loop() {
		for _, mode := range []launcher.Network{launcher.NetworkShared, launcher.NetworkHosts} {
			startup, perCluster, perLeaf := startTree(b, topo, mode)
			b.ReportMetric(float64(startup.Milliseconds()), string(mode)+"-tree-startup-ms")
			b.ReportMetric(perCluster, string(mode)+"-rss-per-cluster-MiB")
			b.ReportMetric(perLeaf, string(mode)+"-leaf-rss-MiB")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// startTree starts topo with the network mode, measures it and stops it.
func startTree(b *testing.B, topo *launcher.Topology, mode launcher.Network) (startup time.Duration, perCluster, perLeaf float64) {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	var parents []string
	for _, e := range topo.Edges() {
		parents = append(parents, e[1])
	}
	start := time.Now()
	te, err := framework.StartTree(ctx, launcher.Config{Network: mode}, framework.Tree{
		Clusters: topo.ClusterOptions(false), Edges: topo.Edges(), Proxies: parents,
	})
	if err != nil {
		b.Fatalf("%s: %v", mode, err)
	}
	startup = time.Since(start)
	defer func() { te.Cleanup(b.Failed(), b.Logf) }()
	time.Sleep(10 * time.Second)
	rss := map[string]int64{}
	for _, c := range te.Clusters() {
		procs := c.Processes()
		for _, p := range te.Processes() {
			if p.Name == c.Name+"-nestlet" || p.Name == c.Name+"-nestlet-proxy" {
				procs = append(procs, p)
			}
		}
		for _, p := range procs {
			if n, err := framework.RSSBytes(p); err == nil {
				rss[c.Name] += n
			}
		}
	}
	var all, leaves int64
	nLeaves := 0
	for name, n := range rss {
		all += n
		if len(topo.Children(name)) == 0 {
			leaves += n
			nLeaves++
		}
	}
	b.Logf("%s: every Target Ready %s after the start; RSS by cluster (MiB): %s", mode, startup.Round(100*time.Millisecond), formatRSS(rss))
	return startup, float64(all) / float64(len(rss)) / (1 << 20), float64(leaves) / float64(nLeaves) / (1 << 20)
}

func formatRSS(rss map[string]int64) string {
	parts := make([]string, 0, len(rss))
	for _, name := range slices.Sorted(maps.Keys(rss)) {
		parts = append(parts, fmt.Sprintf("%s %d", name, rss[name]>>20))
	}
	return strings.Join(parts, ", ")
}
