package tree

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

const (
	// latencyRequests are the GETs each latency figure is made of.
	latencyRequests = 500
	// fetchBytes is the size of each download of the throughput figures,
	// fetchRounds how many, alternating between the two servers.
	fetchBytes  = 64 << 20
	fetchRounds = 3
)

// BenchmarkPodNetwork: HTTP between pods, from a client in east-1 to a
// server beside it in east-1 (the baseline: the leaf's own bridge), to a
// server in east-2, two tunnels away through the tree (east-1 -> east ->
// east-2), and to a server in west-2, four tunnels away (east-1 -> east ->
// root -> west -> west-2, each gateway a userspace WireGuard in its
// cluster's agent), east-1's direct paths cut meanwhile; then, healed, to
// the same two servers over the direct paths (direct2, direct4: one
// tunnel each), and how long the direct path to west-2 took to come back
// after the heal: request latency p50/p99 on one kept-alive connection,
// and throughput of 64 MiB downloads, alternated between the servers; and
// the CPU the five agents of the tree's path spent per GiB carried.
func BenchmarkPodNetwork(b *testing.B) {
	framework.NeedRealNodes(b)
	ctx := b.Context()
	pods := map[string]string{"client": "east-1", "leaf": "east-1", "tunnel2": "east-2", "tunnel4": "west-2"}
	ns, ips := benchPods(b, "bench-net", pods)
	exec := func(args ...string) []string {
		out, errOut, err := kubectl(ctx, "root", "", append([]string{"-n", ns, "exec", "client", "--", "/demo-app"}, args...)...)
		if err != nil {
			b.Fatalf("demo-app %s: %v: %s", strings.Join(args, " "), err, errOut)
		}
		return strings.Fields(out)
	}
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	agents := []*launcher.Process{}
	for _, p := range env.Processes() {
		for _, c := range []string{"east-1", "east", "root", "west", "west-2"} {
			if p.Name == c+"-nestlet" {
				agents = append(agents, p)
			}
		}
	}
	agentsCPU := func() time.Duration {
		var total time.Duration
		for _, p := range agents {
			t, err := framework.CPUTime(p)
			if err != nil {
				b.Fatal(err)
			}
			total += t
		}
		return total
	}
	p50 := map[string]float64{}
	measure := func(targets ...string) {
		for _, target := range targets {
			f := exec("latency", "http://"+ips[target]+":8080/latency", strconv.Itoa(latencyRequests))
			p50[target] = num(f[0]) / 1000
			b.ReportMetric(num(f[0])/1000, target+"-p50-ms")
			b.ReportMetric(num(f[1])/1000, target+"-p99-ms")
		}
		bytes, seconds, cpu := map[string]float64{}, map[string]float64{}, map[string]time.Duration{}
		for range fetchRounds {
			for _, target := range targets {
				before := agentsCPU()
				f := exec("fetch", fmt.Sprintf("http://%s:8080/bytes/%d", ips[target], fetchBytes))
				cpu[target] += agentsCPU() - before
				bytes[target] += num(f[0])
				seconds[target] += num(f[1])
			}
		}
		for _, target := range targets {
			b.ReportMetric(bytes[target]/seconds[target]/(1<<20), target+"-MiB/s")
			if target == "tunnel4" || target == "direct4" {
				b.ReportMetric(cpu[target].Seconds()/(bytes[target]/(1<<30)), target+"-agents-cpu-s/GiB")
			}
		}
	}
	east1 := env.Cluster("east-1").Host
	others := []*launcher.Host{env.Cluster("east-2").Host, env.Cluster("west-2").Host}
	ends := [][3]string{{"east", "east-1", "east-2"}, {"east", "east-1", "west-2"}}
	for b.Loop() {
		// Through the tree: east-1's direct paths cut.
		for _, h := range others {
			if err := east1.Cut(h); err != nil {
				b.Fatal(err)
			}
		}
		waitPaths(b, false, "through the tree while cut", ends)
		measure("leaf", "tunnel2", "tunnel4")
		// Healed: direct.
		healed := time.Now()
		for _, h := range others {
			if err := east1.Heal(h); err != nil {
				b.Fatal(err)
			}
		}
		waitPaths(b, true, "direct once healed", ends[1:])
		b.ReportMetric(time.Since(healed).Seconds(), "direct4-after-heal-s")
		waitPaths(b, true, "direct once healed", ends[:1])
		ips["direct2"], ips["direct4"] = ips["tunnel2"], ips["tunnel4"]
		measure("direct2", "direct4")
		b.ReportMetric(p50["direct4"]-p50["leaf"], "direct4-added-p50-ms")
		profileDirect(b, exec, ips["direct4"])
	}
}

// profileDirect, with NESTLET_PROFILE_DIR set, records CPU profiles of the
// two agents at the ends of the direct path (east-1, west-2) while the
// client downloads from the server in west-2 for profileSeconds, into that
// directory (<cluster>-agent-direct-cpu.pprof, for `go tool pprof`): where
// their gateways spend the CPU a GiB costs. Without it, it does nothing.
func profileDirect(b *testing.B, exec func(...string) []string, server string) {
	dir := os.Getenv("NESTLET_PROFILE_DIR")
	if dir == "" {
		return
	}
	const profileSeconds = 10
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, c := range []string{"east-1", "west-2"} {
		url := strings.TrimSuffix(tree.MetricsURL[c], "/metrics") + "/debug/pprof/profile?seconds=" + strconv.Itoa(profileSeconds)
		wg.Go(func() {
			file := filepath.Join(dir, c+"-agent-direct-cpu.pprof")
			if err := framework.SaveProfile(context.Background(), http.DefaultClient, url, file); err != nil {
				b.Errorf("profile %s: %v", file, err)
			}
		})
	}
	for end := time.Now().Add(profileSeconds * time.Second); time.Now().Before(end); {
		exec("fetch", fmt.Sprintf("http://%s:8080/bytes/%d", server, fetchBytes))
	}
	wg.Wait()
}

// benchPods makes, in a new namespace at the root named after prefix, a
// demo-app pod by name pinned to each zone of pods, waits until all are
// Ready and returns the namespace and their IPs by name.
func benchPods(b *testing.B, prefix string, pods map[string]string) (string, map[string]string) {
	b.Helper()
	ctx := b.Context()
	ns := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000)
	if err := env.Cluster("root").EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	root := env.Cluster("root").Client
	for name, zone := range pods {
		if _, err := root.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appSpec(map[string]string{"topology.kubernetes.io/zone": zone})}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ips := map[string]string{}
	deadline := time.Now().Add(3 * time.Minute)
	for name := range pods {
		for {
			p, err := root.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && podutil.IsPodReady(p) && p.Status.PodIP != "" {
				ips[name] = p.Status.PodIP
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("pod %s not Ready in 3 minutes", name)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return ns, ips
}
