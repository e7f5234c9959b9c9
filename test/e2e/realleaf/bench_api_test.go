package realleaf

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

const (
	apiCalls  = 200 // per round and pod
	apiRounds = 3
)

// BenchmarkPodAPI measures what a pod's API identity from the cluster it
// was made in costs it (agents with --pod-api=origin): the latency of GETs
// on its API server (a list of one pod, 200 in a row on one connection)
// from a pod made at the root, running two levels down and calling the
// root (through two tunnels and the root's gateway relay), against a pod
// made in the leaf calling the leaf, on the same node, alternated over 3
// rounds. Reported: the median over the rounds of each one's p50 and p99
// and the spread of the p50s (max - min); the table gives the ratio to the
// leaf's.
//
//	go test ./test/e2e/realleaf -run '^$' -bench PodAPI -benchtime 1x
func BenchmarkPodAPI(b *testing.B) {
	framework.NeedRealNodes(b)
	ctx := b.Context()
	ns := fmt.Sprintf("bench-api-%d", time.Now().UnixNano()%1_000_000)
	root, leaf := env.Cluster("root"), env.Cluster("leaf")
	defer removeNamespace(b, ns)
	for _, c := range []*launcher.Cluster{root, leaf} {
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		if err := grantPodReader(ctx, c.Client, ns); err != nil {
			b.Fatal(err)
		}
	}
	callers := map[*launcher.Cluster]string{root: "made-at-root", leaf: "made-in-leaf"}
	for c, name := range callers {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, appPod(name), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := waitReady(ctx, c.Client, ns, name); err != nil {
			b.Fatal(err)
		}
	}
	path := "/api/v1/namespaces/" + ns + "/pods?limit=1"
	for b.Loop() {
		var rootP50, rootP99, leafP50, leafP99 []float64
		for range apiRounds {
			p50, p99 := execAPILatency(ctx, b, root, ns, callers[root], path)
			rootP50, rootP99 = append(rootP50, p50), append(rootP99, p99)
			p50, p99 = execAPILatency(ctx, b, leaf, ns, callers[leaf], path)
			leafP50, leafP99 = append(leafP50, p50), append(leafP99, p99)
		}
		b.ReportMetric(framework.Median(rootP50), "pod-api-root-2hop-p50-ms")
		b.ReportMetric(framework.Median(rootP99), "pod-api-root-2hop-p99-ms")
		b.ReportMetric(slices.Max(rootP50)-slices.Min(rootP50), "pod-api-root-2hop-p50-spread-ms")
		b.ReportMetric(framework.Median(leafP50), "pod-api-leaf-p50-ms")
		b.ReportMetric(framework.Median(leafP99), "pod-api-leaf-p99-ms")
		b.ReportMetric(slices.Max(leafP50)-slices.Min(leafP50), "pod-api-leaf-p50-spread-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// execAPILatency runs `demo-app kube PATH COUNT` in pod ns/name through
// kubectl exec at c and returns its p50 and p99 in milliseconds.
func execAPILatency(ctx context.Context, b *testing.B, c *launcher.Cluster, ns, name, path string) (float64, float64) {
	b.Helper()
	out, errOut, err := framework.Kubectl(ctx, env, c, "", "-n", ns, "exec", name, "--", "/demo-app", "kube", path, strconv.Itoa(apiCalls))
	if err != nil {
		b.Fatalf("API calls from %s/%s in %s: %v: %s", ns, name, c.Name, err, errOut)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		b.Fatalf("API calls from %s/%s: %q", ns, name, out)
	}
	p50, err1 := strconv.ParseFloat(f[0], 64)
	p99, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("API calls from %s/%s: %q", ns, name, out)
	}
	return p50 / 1000, p99 / 1000
}

// BenchmarkEventsUp measures how long a leaf kubelet's Warning event about
// a pod takes to show on the pod at the root, two levels up: 10 pods made
// at the root whose readiness probe fails, each one's first Unhealthy
// event seen by a watch in the leaf and by one at the root (both in this
// process, one clock). Reported: p50 and p99 of root - leaf.
//
//	go test ./test/e2e/realleaf -run '^$' -bench EventsUp -benchtime 1x
func BenchmarkEventsUp(b *testing.B) {
	framework.NeedRealNodes(b)
	const pods = 10
	ctx := b.Context()
	for b.Loop() {
		ns := fmt.Sprintf("bench-events-%d", time.Now().UnixNano()%1_000_000)
		root := env.Cluster("root")
		if err := root.EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		seen := map[string]*firstEvents{}
		for _, c := range []string{"leaf", "root"} {
			seen[c] = &firstEvents{at: map[string]time.Time{}}
			if err := seen[c].watch(ctx, env.Cluster(c).Client, ns); err != nil {
				b.Fatal(err)
			}
		}
		spec := appPodSpec()
		spec.Containers[0].ReadinessProbe.HTTPGet.Port = intstrPort(9) // nothing listens there: never ready
		spec.Containers[0].ReadinessProbe.FailureThreshold = 1
		for i := range pods {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unready-%d", i)}, Spec: spec}
			if _, err := root.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
			return seen["leaf"].count() == pods && seen["root"].count() == pods, nil
		})
		if err != nil {
			b.Fatalf("Unhealthy events of %d pods: %d seen in the leaf, %d at the root", pods, seen["leaf"].count(), seen["root"].count())
		}
		b.StopTimer()
		p50, p99 := framework.Percentiles(framework.Diffs(seen["leaf"].snapshot(), seen["root"].snapshot()))
		b.ReportMetric(p50, "event-leaf-to-root-p50-ms")
		b.ReportMetric(p99, "event-leaf-to-root-p99-ms")
		removeNamespace(b, ns)
		b.StartTimer()
	}
	b.ReportMetric(0, "ns/op")
}

// firstEvents records when an Unhealthy event about each pod was first
// seen.
type firstEvents struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (f *firstEvents) watch(ctx context.Context, c kubernetes.Interface, ns string) error {
	w, err := c.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "reason=Unhealthy"})
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			e, ok := ev.Object.(*corev1.Event)
			if !ok {
				continue
			}
			now := time.Now()
			f.mu.Lock()
			if _, done := f.at[e.InvolvedObject.Name]; !done {
				f.at[e.InvolvedObject.Name] = now
			}
			f.mu.Unlock()
		}
	}()
	return nil
}

func (f *firstEvents) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.at)
}

func (f *firstEvents) snapshot() map[string]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.at)
}

// grantPodReader lets the default ServiceAccount of ns get and list pods.
func grantPodReader(ctx context.Context, c kubernetes.Interface, ns string) error {
	if _, err := c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}, metav1.CreateOptions{})
	return err
}

// waitReady waits until pod ns/name of c is Ready.
func waitReady(ctx context.Context, c kubernetes.Interface, ns, name string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && podReady(p), nil
	})
}
