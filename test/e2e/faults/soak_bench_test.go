package faults

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// soakSettings reads NESTLET_SOAK (how long, default 3m30s, so that the whole
// make bench stays under 40 minutes; longer soaks set it) and
// NESTLET_SOAK_SEED (default: from the clock, printed so a run can be
// replayed).
func soakSettings(b *testing.B) (time.Duration, uint64) {
	d := 3*time.Minute + 30*time.Second
	if v := os.Getenv("NESTLET_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			b.Fatalf("NESTLET_SOAK=%q: %v", v, err)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("NESTLET_SOAK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			b.Fatalf("NESTLET_SOAK_SEED=%q: %v", v, err)
		}
	}
	return d, seed
}

// agentStats returns each child agent's RSS (MiB) and goroutines.
func agentStats(b *testing.B) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, c := range []string{"east", "west"} {
		rss, err := framework.RSSBytes(agent(b, c))
		if err != nil {
			b.Fatal(err)
		}
		g, err := scrapeGauge(b.Context(), tree.MetricsURL[c], "go_goroutines")
		if err != nil {
			b.Fatal(err)
		}
		out[c] = [2]float64{float64(rss) / (1 << 20), g}
	}
	return out
}

// scrapeGauge reads one unlabelled gauge from a Prometheus text endpoint.
func scrapeGauge(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", url, name)
}

// orphanCopies counts, in both leaves, the ConfigMaps and Secrets copied
// for delegates and the reflected Services of ns that outlive their use: a
// leaf without a live delegate must hold none.
func orphanCopies(ctx context.Context, ns string) (int, error) {
	n := 0
	for _, leaf := range []string{"east", "west"} {
		live, _, err := podsOf(ctx, leaf, ns)
		if err != nil {
			return 0, err
		}
		if len(live) > 0 {
			continue
		}
		c := env.Cluster(leaf).Client.CoreV1()
		cms, err := c.ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for _, o := range cms.Items {
			if o.Annotations[api.AnnotationCopiedFrom] != "" {
				n++
			}
		}
		secrets, err := c.Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for _, o := range secrets.Items {
			if o.Annotations[api.AnnotationCopiedFrom] != "" {
				n++
			}
		}
		svcs, err := c.Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for _, o := range svcs.Items {
			if o.Annotations[api.AnnotationOrigin] != "" {
				n++
			}
		}
	}
	return n, nil
}

// BenchmarkSoak scales a Deployment at the root (with a ConfigMap, a Secret
// and a Service) to a random size every 3 s while cutting and restoring the
// links of east and west at random (seeded, printed), for NESTLET_SOAK
// (4 minutes by default). Then it heals everything and measures how long
// the tree takes to converge, pods lost, orphans and duplicates among the
// delegates, copies left in leaves without delegates, and the agents' RSS
// and goroutines before and after; a fault watch on every cluster
// throughout (watchFaults) counts what happened in between: two delegates
// of one pod alive at once, root pods gone without a deletion, delegates
// outliving their parent past orphanGrace, each with its worst duration.
//
//	NESTLET_SOAK=10m NESTLET_SOAK_SEED=42 go test ./test/e2e/faults -run '^$' -bench Soak -benchtime 1x
func BenchmarkSoak(b *testing.B) {
	dur, seed := soakSettings(b)
	b.Logf("soak for %s, NESTLET_SOAK_SEED=%d", dur, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx := b.Context()
	root := env.Cluster("root").Client
	for b.Loop() {
		ns := fmt.Sprintf("soak-%d", time.Now().UnixNano()%1_000_000)
		if err := env.Cluster("root").EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		if _, err := root.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := root.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		d := deployment(ns, "bench", 6)
		d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
		}
		if _, err := root.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := root.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
			Spec: corev1.ServiceSpec{Selector: d.Spec.Selector.MatchLabels, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		settle(b, ns, 6, 2*time.Minute)
		before := agentStats(b)
		watch := watchFaults(b, ns)

		cutUntil := map[string]time.Time{} // the links cut, until when
		var cuts, scales, longCuts int
		deadline := time.Now().Add(dur)
		for time.Now().Before(deadline) {
			for child, until := range cutUntil {
				if time.Now().After(until) {
					if err := tree.Link(child, "root").Restore(); err != nil {
						b.Fatal(err)
					}
					delete(cutUntil, child)
				}
			}
			switch r := rng.IntN(10); {
			case r < 6:
				scale(b, ns, int32(rng.IntN(13)))
				scales++
			case r < 9:
				child := []string{"east", "west"}[rng.IntN(2)]
				if _, cut := cutUntil[child]; !cut && len(cutUntil) == 0 { // one cut at a time: the other takes the load
					length := time.Duration(2+rng.IntN(40)) * time.Second
					if length > graceSeconds*time.Second {
						longCuts++
					}
					if err := tree.Link(child, "root").Cut(); err != nil {
						b.Fatal(err)
					}
					cutUntil[child] = time.Now().Add(length)
					cuts++
				}
			}
			time.Sleep(3 * time.Second)
		}
		for child := range cutUntil {
			if err := tree.Link(child, "root").Restore(); err != nil {
				b.Fatal(err)
			}
		}
		healed := time.Now()
		const final = 6
		scale(b, ns, final)
		settle(b, ns, final, 5*time.Minute)
		converged := time.Since(healed)
		live, orphans, dups, err := census(ctx, ns)
		if err != nil {
			b.Fatal(err)
		}
		var copies int
		_ = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			copies, err = orphanCopies(ctx, ns)
			return err == nil && copies == 0, nil
		})
		after := agentStats(b)

		b.StopTimer()
		watched := watch.Stop()
		b.Logf("faults watched throughout: %s", watched)
		b.Logf("soak: %d scales, %d cuts (%d longer than the root's grace period), converged %s after the last heal",
			scales, cuts, longCuts, converged.Round(time.Millisecond))
		b.ReportMetric(dur.Minutes(), "soak-minutes")
		b.ReportMetric(float64(seed%1_000_000), "soak-seed-mod-1e6")
		b.ReportMetric(float64(scales), "soak-scales")
		b.ReportMetric(float64(cuts), "soak-cuts")
		b.ReportMetric(float64(longCuts), "soak-long-cuts")
		b.ReportMetric(float64(converged.Milliseconds()), "soak-converge-ms")
		b.ReportMetric(float64(max(0, final-live)), "soak-pods-lost")
		b.ReportMetric(float64(orphans), "soak-orphans")
		b.ReportMetric(float64(dups), "soak-duplicates")
		b.ReportMetric(float64(copies), "soak-orphan-copies")
		b.ReportMetric(float64(watched.Duplicates.N), "soak-watched-duplicates")
		b.ReportMetric(float64(watched.Duplicates.Worst.Milliseconds()), "soak-watched-duplicate-worst-ms")
		b.ReportMetric(float64(watched.Vanished.N), "soak-watched-vanished")
		b.ReportMetric(float64(watched.Orphans.N), "soak-watched-orphans")
		b.ReportMetric(float64(watched.Orphans.Worst.Milliseconds()), "soak-watched-orphan-worst-ms")
		for _, c := range []string{"east", "west"} {
			b.ReportMetric(before[c][0], "soak-agent-"+c+"-rss-before-MiB")
			b.ReportMetric(after[c][0], "soak-agent-"+c+"-rss-after-MiB")
			b.ReportMetric(before[c][1], "soak-agent-"+c+"-goroutines-before")
			b.ReportMetric(after[c][1], "soak-agent-"+c+"-goroutines-after")
		}
		b.ReportMetric(0, "ns/op")
		_ = root.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		b.StartTimer()
	}
}
