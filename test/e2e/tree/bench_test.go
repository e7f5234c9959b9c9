package tree

import (
	"fmt"
	"strconv"
	"strings"
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
// server in east-2, two tunnels away (east-1 -> east -> east-2), and to a
// server in west-2, four tunnels away (east-1 -> east -> root -> west ->
// west-2, each gateway a userspace WireGuard in its cluster's agent):
// request latency p50/p99 on one kept-alive connection, and throughput of
// 64 MiB downloads, alternated between the two servers; and the CPU the
// five agents on the tunnel path spent per GiB carried.
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
	for b.Loop() {
		for _, target := range []string{"leaf", "tunnel2", "tunnel4"} {
			f := exec("latency", "http://"+ips[target]+":8080/latency", strconv.Itoa(latencyRequests))
			b.ReportMetric(num(f[0])/1000, target+"-p50-ms")
			b.ReportMetric(num(f[1])/1000, target+"-p99-ms")
		}
		bytes, seconds := map[string]float64{}, map[string]float64{}
		var tunnelCPU time.Duration
		for range fetchRounds {
			for _, target := range []string{"leaf", "tunnel2", "tunnel4"} {
				before := agentsCPU()
				f := exec("fetch", fmt.Sprintf("http://%s:8080/bytes/%d", ips[target], fetchBytes))
				if target == "tunnel4" {
					tunnelCPU += agentsCPU() - before
				}
				bytes[target] += num(f[0])
				seconds[target] += num(f[1])
			}
		}
		for _, target := range []string{"leaf", "tunnel2", "tunnel4"} {
			b.ReportMetric(bytes[target]/seconds[target]/(1<<20), target+"-MiB/s")
		}
		b.ReportMetric(tunnelCPU.Seconds()/(bytes["tunnel4"]/(1<<30)), "tunnel4-agents-cpu-s/GiB")
	}
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
