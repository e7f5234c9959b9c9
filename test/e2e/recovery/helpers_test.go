package recovery

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

var levels = []string{"root", "mid", "leaf"}

// edges are the tree's joins, {child, parent}: the child's virtual node
// and lease live in the parent.
var edges = [][2]string{{"mid", "root"}, {"leaf", "mid"}}

// namespace makes a namespace at the root for the test
// (framework.KeptNamespace) once mid is Ready at the root and leaf at mid,
// without a taint of the node lifecycle. Its pods and containers are
// watched until the test ends (watchThroughout).
func namespace(t *testing.T) string {
	t.Helper()
	framework.NeedRealNodes(t) // the package's tree has a real node
	waitWhole(t)
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	watchThroughout(t, ns)
	return ns
}

// orphanGrace is how long a delegate may outlive its parent pod before the
// fault watch counts it (logged, not failed on): the longest outage of the
// package's tests and as long again to catch up.
const orphanGrace = 2 * time.Minute

// watchThroughout watches, while the test's faults happen, the pods of ns
// at every level and their containers in the leaf's runtime (startWatches),
// and fails the test on a pod run twice at once by either count; the rest
// is logged.
func watchThroughout(t *testing.T, ns string) {
	t.Helper()
	pods, runs := startWatches(t, ns)
	t.Cleanup(func() {
		r, twice := pods.Stop(), runs.Stop()
		t.Logf("faults watched throughout: %s; containers run twice at once in the leaf's runtime: %s", r, twice)
		if r.Duplicates.N != 0 {
			t.Errorf("pods with two delegates alive at once: %s", r.Duplicates)
		}
		if twice.N != 0 {
			t.Errorf("containers of one pod run at once in the leaf's runtime: %s", twice)
		}
	})
}

// startWatches watches the pods of ns at every level
// (framework.FaultWatch) and their containers in the leaf's runtime
// (framework.ContainerWatch) until they are stopped or tb ends.
func startWatches(tb testing.TB, ns string) (*framework.FaultWatch, *framework.ContainerWatch) {
	tb.Helper()
	clusters := map[string]kubernetes.Interface{}
	for _, c := range levels {
		clusters[c] = env.Cluster(c).Client
	}
	parentOf := map[string]string{}
	for _, e := range edges {
		parentOf[e[0]] = e[1]
	}
	pods, err := framework.StartFaultWatch(tb.Context(), clusters, parentOf, ns, orphanGrace)
	require.NoError(tb, err)
	runs, err := framework.StartContainerWatch(tb.Context(), []*launcher.RealNode{env.Cluster("leaf").RealNode(realNode)}, ns)
	if err != nil {
		pods.Stop()
	}
	require.NoError(tb, err)
	return pods, runs
}

// waitWhole waits until every child is a Ready, untainted node of its
// parent.
func waitWhole(t testing.TB) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "the tree is whole", func(ctx context.Context) (bool, string) {
		for _, e := range edges {
			n, err := env.Cluster(e[1]).Client.CoreV1().Nodes().Get(ctx, e[0], metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !launcher.NodeReady(n) {
				return false, e[0] + " is not Ready in " + e[1]
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady {
					return false, e[0] + " is tainted " + taint.Key + " in " + e[1]
				}
			}
		}
		return true, ""
	})
}

// deployment runs replicas on the kwok nodes of the leaf.
func deployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"topology.kubernetes.io/zone": "kwok"},
					Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
				},
			},
		},
	}
}

// livePods returns the Running, not terminating pods of ns in cluster, by
// name and UID, how many pods it holds in all, and the names of those not
// Ready.
func livePods(ctx context.Context, cluster, ns string) (live map[string]string, all int, notReady []string, err error) {
	list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, nil, err
	}
	live = map[string]string{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			live[p.Name] = string(p.UID)
		}
		if !podutil.IsPodReady(p) {
			notReady = append(notReady, p.Name)
		}
	}
	return live, len(list.Items), notReady, nil
}

// waitLeasesRenewed waits until both virtual nodes' leases (mid's in root,
// leaf's in mid) have been renewed after since: an agent renews only after
// its cluster's API server has passed a readiness check, so a fault that
// follows before then would find the outage tolerance already spent.
func waitLeasesRenewed(t testing.TB, since time.Time) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "the leases renewed", func(ctx context.Context) (bool, string) {
		for _, e := range edges {
			l, err := env.Cluster(e[1]).Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, e[0], metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if l.Spec.RenewTime == nil || !l.Spec.RenewTime.After(since) {
				return false, fmt.Sprintf("%s's lease in %s was last renewed at %v", e[0], e[1], l.Spec.RenewTime)
			}
		}
		return true, ""
	})
}

// settle waits until every level holds exactly want pods of ns, all
// Running and Ready, and returns them by level.
func settle(t testing.TB, ns string, want int, timeout time.Duration) map[string]map[string]string {
	t.Helper()
	var out map[string]map[string]string
	framework.Eventually(t, timeout, "settled", func(ctx context.Context) (bool, string) {
		out = map[string]map[string]string{}
		for _, c := range levels {
			live, all, notReady, err := livePods(ctx, c, ns)
			if err != nil {
				return false, err.Error()
			}
			if len(live) != want || all != want {
				return false, fmt.Sprintf("%s holds %d pods, %d of them Running and not terminating, want %d", c, all, len(live), want)
			}
			if len(notReady) > 0 {
				return false, fmt.Sprintf("%s: pods not Ready: %v", c, notReady)
			}
			out[c] = live
		}
		return true, ""
	})
	return out
}

// phaseRecorder records every change of phase or readiness of the root's
// pods of a namespace, from a watch.
type phaseRecorder struct {
	stop    func()
	mu      sync.Mutex
	last    map[string]string
	changes []string
}

func podState(p *corev1.Pod) string {
	ready := "unknown"
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = string(c.Status)
		}
	}
	return fmt.Sprintf("%s/ready=%s/deleting=%v", p.Status.Phase, ready, p.DeletionTimestamp != nil)
}

// recordPhases starts recording the root's pods of ns as they are now.
func recordPhases(t testing.TB, ns string) *phaseRecorder {
	t.Helper()
	r := &phaseRecorder{last: map[string]string{}}
	client := env.Cluster("root").Client.CoreV1().Pods(ns)
	list, err := client.List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range list.Items {
		r.last[list.Items[i].Name] = podState(&list.Items[i])
	}
	// Through restarts of the root's API server.
	w, err := watchtools.NewRetryWatcherWithContext(t.Context(), list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return client.Watch(ctx, o) },
	})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	r.stop = w.Stop
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			state := podState(p)
			if ev.Type == watch.Deleted {
				state = "deleted"
			}
			r.mu.Lock()
			if r.last[p.Name] != state {
				r.changes = append(r.changes, fmt.Sprintf("%s %s: %s -> %s", time.Now().Format("15:04:05.000"), p.Name, r.last[p.Name], state))
				r.last[p.Name] = state
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// Changes returns the changes recorded so far.
func (r *phaseRecorder) Changes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.changes...)
}

// sameAs fails unless every level holds exactly the pods of before.
func sameAs(t *testing.T, ns string, before map[string]map[string]string) {
	t.Helper()
	for _, c := range levels {
		live, _, _, err := livePods(t.Context(), c, ns)
		require.NoError(t, err)
		require.True(t, maps.Equal(before[c], live), "%s: the same pods as before: %v, now %v", c, before[c], live)
	}
}
