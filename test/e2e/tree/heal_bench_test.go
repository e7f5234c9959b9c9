package tree

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nestlet/nestlet/test/framework"
)

const (
	// healCut is how long each cut of west's WAN link lasts (every packet
	// dropped, the tunnels' among them): shorter than the root's grace
	// period, so that nothing is evicted or replaced meanwhile.
	healCut = 12 * time.Second
	// healRounds are the cuts each figure is made of.
	healRounds = 5
)

// BenchmarkTunnelHeal: a client in east-1 polls a server in west-2 (every
// 20 ms, each request within 200 ms) while west's WAN link to the root is
// cut for healCut, then healed; the figure is the time from the heal to the
// first answer through the tunnels (east-1 -> east -> root -> west ->
// west-2), p50 and worst of healRounds cuts.
func BenchmarkTunnelHeal(b *testing.B) {
	framework.NeedRealNodes(b)
	ctx := b.Context()
	ns, ips := benchPods(b, "bench-heal", map[string]string{"client": "east-1", "server": "west-2"})
	url := "http://" + ips["server"] + ":8080/heal"
	link := tree.Link("west", "root")
	defer func() { _ = link.Restore() }()
	// Through the tree: the direct path between east-1 and west-2 cut
	// meanwhile (it would carry the traffic past the cut).
	east1, west2 := env.Cluster("east-1").Host, env.Cluster("west-2").Host
	if err := east1.Cut(west2); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = east1.Heal(west2) }()
	waitPath(b, false, "through the tree while cut")
	for b.Loop() {
		var took []time.Duration
		for range healRounds {
			if _, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", "client", "--", "/demo-app", "until", url, "60"); err != nil {
				b.Fatalf("the server does not answer before the cut: %v: %s", err, errOut)
			}
			if err := link.Cut(); err != nil {
				b.Fatal(err)
			}
			type result struct {
				out, errOut string
				err         error
			}
			done := make(chan result, 1)
			go func() {
				out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", "client", "--", "/demo-app", "until", url, "120")
				done <- result{out, errOut, err}
			}()
			time.Sleep(healCut)
			if err := link.Restore(); err != nil {
				b.Fatal(err)
			}
			healed := time.Now()
			r := <-done
			if r.err != nil {
				b.Fatalf("no answer after the heal: %v: %s", r.err, r.errOut)
			}
			at, err := strconv.ParseInt(strings.TrimSpace(r.out), 10, 64)
			if err != nil {
				b.Fatalf("demo-app until said %q: %v", r.out, err)
			}
			// The pods run on this machine: one clock.
			took = append(took, time.Unix(0, at).Sub(healed))
		}
		slices.Sort(took)
		b.ReportMetric(took[len(took)/2].Seconds()*1000, "heal-p50-ms")
		b.ReportMetric(took[len(took)-1].Seconds()*1000, "heal-max-ms")
	}
}
