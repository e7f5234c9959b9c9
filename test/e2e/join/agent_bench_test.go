package join

import (
	"testing"
	"time"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkAgentIdle (in the first file, so that it runs before the other
// join benchmarks of this package grow the agent): RSS and CPU of west's agent, idle, with its one
// Target and then with 10 (9 more joins of root under other names), each
// over 30 s of idling (reports every 3 s, as the test tree is set up).
func BenchmarkAgentIdle(b *testing.B) {
	var agent *launcher.Process
	for _, p := range env.Processes() {
		if p.Name == "west-nestlet" {
			agent = p
		}
	}
	if agent == nil {
		b.Fatal("no agent process for west")
	}
	idle := func() (rssMiB, anonMiB, cpuMilli float64) {
		cpu0, err := framework.CPUTime(agent)
		if err != nil {
			b.Fatal(err)
		}
		const period = 30 * time.Second
		time.Sleep(period) // idling is what is measured
		cpu1, err := framework.CPUTime(agent)
		if err != nil {
			b.Fatal(err)
		}
		rss, err := framework.RSSBytes(agent)
		if err != nil {
			b.Fatal(err)
		}
		anon, err := framework.AnonRSSBytes(agent)
		if err != nil {
			b.Fatal(err)
		}
		return float64(rss) / (1 << 20), float64(anon) / (1 << 20), float64(cpu1-cpu0) / float64(period) * 1000
	}
	for b.Loop() {
		// RSS holds the binary's code the agent ran, a page-cache file
		// mapping shared by every process of that binary; the anonymous
		// part is the agent's own memory.
		rss1, anon1, cpu1 := idle()
		b.ReportMetric(rss1, "agent-1-target-rss-MiB")
		b.ReportMetric(anon1, "agent-1-target-anon-MiB")
		b.ReportMetric(cpu1, "agent-1-target-cpu-millicores")
		// Nine more Targets, kept while the agent idles.
		benchTargets(b, "bench-idle", 9, func() {
			rss10, anon10, cpu10 := idle()
			b.ReportMetric(rss10, "agent-10-targets-rss-MiB")
			b.ReportMetric(anon10, "agent-10-targets-anon-MiB")
			b.ReportMetric(cpu10, "agent-10-targets-cpu-millicores")
		})
	}
	b.ReportMetric(0, "ns/op")
}
