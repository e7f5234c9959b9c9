package join

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// benchTargets creates n Targets in west at once, each a join of root
// under its own cluster name prefix-<i> (the same token and pin as west's
// own join), and returns, per name, the time from its create to its node
// Ready in root (seen by one watch on root's nodes). whileUp (optional)
// runs once all are Ready. The Targets are deleted, and their nodes gone,
// before it returns.
func benchTargets(b *testing.B, prefix string, n int, whileUp func()) map[string]time.Duration {
	ctx := b.Context()
	westTargets, good := westTarget(b)
	rootNodes := env.Cluster("root").Client.CoreV1().Nodes()
	w, err := rootNodes.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	phases := followCSRs(b, prefix)
	var mu sync.Mutex
	created := map[string]time.Time{}
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		wg.Go(func() {
			tg := benchTarget(good, name)
			// A fixed share, as if each were a cluster of its own: by
			// default the Targets of one cluster split its capacity
			// evenly, so each join would change the summary of every
			// other, and its next report would cost a write that 60
			// separate children do not make.
			tg.Spec.CapacityPercent = ptr.To[int32](1)
			// And the default report frequency, not the test tree's
			// 3 s: the summary is re-sent unchanged every period, a
			// steady cost of every child, not one of its join (at 3 s,
			// a re-send fell into the count for about half the joins).
			tg.Spec.ReportFrequency = metav1.Duration{Duration: defaultReportFrequency}
			start := time.Now()
			if _, err := westTargets.Create(ctx, tg, metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			created[name] = start
			mu.Unlock()
		})
	}
	wg.Wait()
	defer func() {
		for i := range n {
			_ = westTargets.Delete(context.WithoutCancel(ctx), fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{})
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := rootNodes.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // retried
			}
			return !slices.ContainsFunc(list.Items, func(n corev1.Node) bool { return strings.HasPrefix(n.Name, prefix+"-") }), nil
		})
		if err != nil && !apierrors.IsNotFound(err) {
			b.Errorf("bench nodes %s-* not removed: %v", prefix, err)
		}
	}()
	if b.Failed() {
		b.FailNow()
	}
	ready := map[string]time.Duration{}
	timeout := time.After(3 * time.Minute)
	for len(ready) < n {
		select {
		case <-timeout:
			b.Fatalf("%d of %d nodes Ready after 3m; %s", len(ready), n, notReady(ctx, westTargets, prefix, n, ready))
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("watch closed")
			}
			node, isNode := ev.Object.(*corev1.Node)
			if !isNode || ev.Type == watch.Deleted || !strings.HasPrefix(node.Name, prefix+"-") || !launcher.NodeReady(node) {
				continue
			}
			if _, done := ready[node.Name]; !done {
				mu.Lock()
				ready[node.Name] = time.Since(created[node.Name])
				mu.Unlock()
			}
		}
	}
	if whileUp != nil {
		whileUp()
	}
	phases.report(b, prefix, created, ready)
	return ready
}

// notReady says, for each of the n joins not in ready, what its Target
// and its node in root say.
func notReady(ctx context.Context, westTargets v1alpha1.TargetInterface, prefix string, n int, ready map[string]time.Duration) string {
	var out []string
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if _, ok := ready[name]; ok {
			continue
		}
		says := "no Target"
		if tg, err := westTargets.Get(ctx, name, metav1.GetOptions{}); err == nil {
			says = "Target conditions none"
			for _, c := range tg.Status.Conditions {
				says = fmt.Sprintf("Target %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		if node, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			for _, c := range node.Status.Conditions {
				says += fmt.Sprintf("; node %s=%s %s", c.Type, c.Status, c.Message)
			}
		} else {
			says += "; node: " + err.Error()
		}
		out = append(out, name+": "+says)
	}
	return strings.Join(out, "\n")
}

// benchTarget returns a Target like good (west's own) under cluster name
// name, with the finalizer, as nestctl join and the chart write it.
func benchTarget(good *v1alpha1.Target, name string) *v1alpha1.Target {
	tg := &v1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{api.FinalizerCleanup}}, Spec: *good.Spec.DeepCopy()}
	tg.Spec.ClusterName = name
	return tg
}

// backgroundWindow is how long BenchmarkJoin60AtOnce measures the
// clusters' traffic without joins.
const backgroundWindow = 5 * time.Second

// defaultReportFrequency is a Target's when nestctl join is not told one.
var defaultReportFrequency, _ = time.ParseDuration(v1alpha1.DefaultReportFrequency)

// csrPhases records, per cluster name, when a watch on root's CSRs first
// saw its node CSR and its certificate issued.
type csrPhases struct {
	mu           sync.Mutex
	seen, issued map[string]time.Time
}

func followCSRs(b *testing.B, prefix string) *csrPhases {
	ctx := b.Context()
	p := &csrPhases{seen: map[string]time.Time{}, issued: map[string]time.Time{}}
	w, err := env.Cluster("root").Client.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !ok || !strings.HasPrefix(csr.Name, "nestlet-"+prefix+"-") {
				continue
			}
			// nestlet-<cluster name>-<10 hex digits>
			name := strings.TrimPrefix(csr.Name[:len(csr.Name)-11], "nestlet-")
			now := time.Now()
			p.mu.Lock()
			if _, ok := p.seen[name]; !ok {
				p.seen[name] = now
			}
			if _, ok := p.issued[name]; !ok && len(csr.Status.Certificate) > 0 {
				p.issued[name] = now
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// report splits each join (created -> ready) into discovery (-> CSR seen
// in root), approval (-> certificate issued) and register (-> node Ready).
func (p *csrPhases) report(b *testing.B, prefix string, created map[string]time.Time, ready map[string]time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	discovery, approval, register := map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}
	for name, t0 := range created {
		seen, ok1 := p.seen[name]
		issued, ok2 := p.issued[name]
		d, ok3 := ready[name]
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		discovery[name] = seen.Sub(t0)
		approval[name] = issued.Sub(seen)
		register[name] = t0.Add(d).Sub(issued)
	}
	if len(discovery) == 0 {
		return
	}
	for phase, ds := range map[string]map[string]time.Duration{"discovery": discovery, "approval": approval, "register": register} {
		b.ReportMetric(quantileMS(ds, 0.5), prefix+"-"+phase+"-p50-ms")
		b.ReportMetric(quantileMS(ds, 0.99), prefix+"-"+phase+"-p99-ms")
	}
}

// westTarget returns a Target client of west and west's own (Ready)
// Target, whose spec the benchmarks copy under other cluster names.
func westTarget(b *testing.B) (v1alpha1.TargetInterface, *v1alpha1.Target) {
	westTargets, err := v1alpha1.NewTargetClient(env.Cluster("west").Config)
	if err != nil {
		b.Fatal(err)
	}
	good, err := westTargets.Get(b.Context(), targetOf["west"], metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// West's own token admits west only: the benchmarks' many names join
	// with one token made for no child, as a fleet's would.
	good.Spec.BootstrapTokenSecretRef = joinToken(b, "west", fmt.Sprintf("bench-fleet-%d", time.Now().UnixNano()%1_000_000), "--auto-approve")
	return westTargets, good
}

func quantileMS(ds map[string]time.Duration, q float64) float64 {
	return framework.Quantile(slices.Collect(maps.Values(ds)), q)
}

// BenchmarkJoin60AtOnce: 60 joins of one parent at once, from Target
// applied to node Ready in the parent. The 60 Targets are applied in one
// child cluster (west) under 60 cluster names: 60 CSRs, identities, nodes
// and leases against the real parent at once, and one agent running all of
// them (the 60 children's API servers are not simulated here).
func BenchmarkJoin60AtOnce(b *testing.B) {
	for b.Loop() {
		// The clusters' own traffic (lease renewals, reports, their
		// controllers), over a quiet window just before: what of the
		// count below would have been there without the joins.
		bg0, bgStart := requests(b), time.Now()
		time.Sleep(backgroundWindow)
		bg1, bgWall := requests(b), time.Since(bgStart).Seconds()
		background := 0.0
		for key, n := range bg1 {
			if !strings.HasSuffix(key, "/metrics-GET") { // the samples' own reads
				background += n - bg0[key]
			}
		}
		cpu0, start := framework.CPUByKind(env), time.Now()
		req0 := requests(b)
		ready := benchTargets(b, "bench-60", 60, func() {
			// CPU of every process while the 60 joined, in cores: is
			// the machine (2 cores) the limit?
			wall := time.Since(start).Seconds()
			total := 0.0
			for kind, t := range framework.CPUByKind(env) {
				used := (t - cpu0[kind]).Seconds()
				total += used
				b.ReportMetric(used/wall, "join60-cores-"+kind)
			}
			b.ReportMetric(total/wall, "join60-cores-all")
			// What a join costs the machine, every process together:
			// with the machine busy, the latency above is this work
			// queued behind the other joins'.
			b.ReportMetric(total*1000/60, "join60-cpu-ms-per-join")
			// API requests per join, by cluster, resource and verb (the
			// frequent ones), and all of them, in each cluster and in
			// both, once every join is done, including what follows a
			// node's readiness (its lease, its role label, the removal
			// of the taint every new node gets, the node lifecycle
			// controller's RegisteredNode event), less the benchmark's
			// own reads. A watch counts once it ends: the CSR's does, the
			// agent's watches of its pods, node and Services stay open.
			own := joinsDone(b, "bench-60", 60)
			totals := map[string]float64{}
			for key, n := range requests(b) {
				per := (n - req0[key] - own[key]) / 60
				if per >= 0.5 {
					b.ReportMetric(per, "join60-requests-per-join-"+key)
				}
				cluster, _, _ := strings.Cut(key, "-")
				totals[cluster] += per
				totals["total"] += per
			}
			for k, v := range totals {
				b.ReportMetric(v, "join60-requests-per-join-all-"+k)
			}
			// The background at the quiet window's rate, over the time
			// the count took, and the total less it.
			bgPerJoin := max(background, 0) / bgWall * time.Since(start).Seconds() / 60
			b.ReportMetric(bgPerJoin, "join60-requests-per-join-background")
			b.ReportMetric(totals["total"]-bgPerJoin, "join60-requests-per-join-less-background")
		})
		b.ReportMetric(quantileMS(ready, 0.5), "join60-p50-ms")
		b.ReportMetric(quantileMS(ready, 0.99), "join60-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// joinsDone waits until the n nodes prefix-* in root are done with their
// joins: a lease, the cluster role label, no not-ready taint, the TTL
// annotation, the node lifecycle controller's RegisteredNode event (it
// looks for new nodes every 5 s), and their Targets' Ready condition
// written in west. It returns the requests it made itself, keyed as
// requests keys them, for the count of the joins' requests to leave out.
func joinsDone(b *testing.B, prefix string, n int) map[string]float64 {
	ctx := b.Context()
	root := env.Cluster("root").Client
	westTargets, _ := westTarget(b)
	own := map[string]float64{"west-targets-GET": 1}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, key := range []string{"root-nodes-LIST", "root-leases-LIST", "root-events-LIST", "west-targets-LIST"} {
			own[key]++
		}
		nodes, err := root.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		leases, err := root.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		events, err := root.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=RegisteredNode"})
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		targets, err := westTargets.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		leased, registered := map[string]bool{}, map[string]bool{}
		for _, l := range leases.Items {
			leased[l.Name] = true
		}
		for _, e := range events.Items {
			registered[e.InvolvedObject.Name] = true
		}
		done := 0
		for _, node := range nodes.Items {
			_, role := node.Labels[api.LabelNodeRoleCluster]
			_, ttl := node.Annotations[corev1.ObjectTTLAnnotationKey]
			tainted := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
			if strings.HasPrefix(node.Name, prefix+"-") && leased[node.Name] && registered[node.Name] && role && ttl && !tainted {
				done++
			}
		}
		reported := 0
		for _, t := range targets.Items {
			if strings.HasPrefix(t.Name, prefix+"-") && meta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionReady) {
				reported++
			}
		}
		return done == n && reported == n, nil
	})
	if err != nil {
		b.Fatalf("the %d joins %s-* are not all done: %v", n, prefix, err)
	}
	return own
}

// requests returns root's and west's API request counts, keyed
// <cluster>-<resource>-<verb>.
func requests(b *testing.B) map[string]float64 {
	out := map[string]float64{}
	for _, c := range []string{"root", "west"} {
		r, err := framework.Requests(b.Context(), env.Cluster(c))
		if err != nil {
			b.Fatal(err)
		}
		for k, n := range r {
			out[c+"-"+k] = n
		}
	}
	return out
}
