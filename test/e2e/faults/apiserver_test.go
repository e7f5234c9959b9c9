package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// outage is how long the root's API server stays down: far longer than
// its controller manager's grace period (20 s here) and the agents' lease
// (40 s), and long enough for every client's retries to reach their
// longest step (client-go's reflectors back off up to 30 s; the agents'
// own backoffs step 1, 2, 4 ... 32 s by then).
const outage = 65 * time.Second

func agent(t testing.TB, cluster string) *launcher.Process {
	t.Helper()
	for _, p := range env.Processes() {
		if p.Name == cluster+"-nestlet" {
			return p
		}
	}
	t.Fatalf("no agent process for %s", cluster)
	return nil
}

// stopAPIServer stops cluster's API server (gracefully, as a restart does)
// and returns what starts it again; the test's cleanup starts it if the
// test did not.
func stopAPIServer(t *testing.T, cluster string) (restart func() error) {
	t.Helper()
	apiserver := env.Cluster(cluster).Process("kube-apiserver")
	require.NotNil(t, apiserver)
	apiserver.Stop(10 * time.Second)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = apiserver.Restart()
		}
	})
	return func() error {
		err := apiserver.Restart()
		restarted = err == nil
		return err
	}
}

// The root's API server down (its etcd kept): the children keep running
// every delegate, their agents wait without crashing, and once it is back
// the tree is what it was within seconds: the same pods at both levels.
func TestParentAPIServerDown(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	d := deployment(ns, "steady", 6)
	d.Spec.Template.Spec.Tolerations = nil // the default 300 s: an outage is not a reason to evict
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	settle(t, ns, 6, 2*time.Minute)
	before := map[string]map[string]string{}
	for _, c := range []string{"root", "east", "west"} {
		live, _, err := podsOf(ctx, c, ns)
		require.NoError(t, err)
		before[c] = live
	}
	agents := map[string]int{}
	for _, c := range []string{"east", "west"} {
		agents[c] = agent(t, c).PID()
		rss, err := framework.RSSBytes(agent(t, c))
		require.NoError(t, err)
		t.Logf("%s agent before: RSS %d MiB", c, rss>>20)
	}

	restart := stopAPIServer(t, "root")
	deadline := time.Now().Add(outage)
	for time.Now().Before(deadline) {
		for _, c := range []string{"east", "west"} {
			live, _, err := podsOf(ctx, c, ns)
			require.NoError(t, err)
			require.Equal(t, before[c], live, "%s keeps running its delegates while the root is down", c)
			require.True(t, agent(t, c).Alive(), "%s's agent is alive", c)
		}
		time.Sleep(5 * time.Second)
	}
	require.NoError(t, restart())
	back := time.Now()
	framework.EventuallyEvery(t, 200*time.Millisecond, 2*time.Minute, "the root's API server ready again", func(ctx context.Context) (bool, string) {
		body, err := env.Cluster("root").Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", fmt.Sprintf("%q %v", body, err)
	})
	t.Logf("the root's API server ready %s after its restart", time.Since(back).Round(time.Millisecond))
	waitRootLive(ctx, t)
	t.Logf("the root's scheduler and controllers act again %s after its restart", time.Since(back).Round(time.Millisecond))

	settle(t, ns, 6, 2*time.Minute)
	t.Logf("settled %s after the restart", time.Since(back).Round(time.Millisecond))
	for _, c := range []string{"root", "east", "west"} {
		live, _, err := podsOf(ctx, c, ns)
		require.NoError(t, err)
		require.Equal(t, before[c], live, "%s: the same pods as before the outage", c)
	}
	for _, c := range []string{"east", "west"} {
		require.Equal(t, agents[c], agent(t, c).PID(), "%s's agent never restarted", c)
		rss, err := framework.RSSBytes(agent(t, c))
		require.NoError(t, err)
		t.Logf("%s agent after: RSS %d MiB", c, rss>>20)
	}
	// Both children report again: Ready at the root.
	for _, c := range []string{"east", "west"} {
		framework.Eventually(t, time.Minute, c+" Ready at the root after the outage", func(ctx context.Context) (bool, string) {
			n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, c, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return launcher.NodeReady(n), "not Ready"
		})
	}
	t.Logf("children Ready at the root %s after the restart", time.Since(back).Round(time.Millisecond))
}

// Pods sent to a child while its API server restarts are not failed, not
// even with restartPolicy Never. Bound to it by hand (no reservation), the
// child's agent retries their delegates (its virtual node stays Ready at
// the root meanwhile, the outage being shorter than the agent's
// tolerance) and says so in an event on each; placed by the scheduler,
// the pod stays Pending at the root, the child unable to answer for a
// place. Both run once the child's API server is back.
func TestChildAPIServerRestartKeepsNewPods(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	spec := deployment(ns, "once", 1).Spec.Template.Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.Affinity = nil
	spec.NodeSelector = map[string]string{"topology.kubernetes.io/region": "east"}
	rootPods := env.Cluster("root").Client.CoreV1().Pods(ns)
	// Pods, unlike a Deployment's, are not retried: wait for the new
	// namespace's service account at the root (its controller manager's
	// informers may still be backing off, up to a minute, after the
	// root's outage in TestParentAPIServerDown).
	framework.Eventually(t, 2*time.Minute, "the default service account of "+ns+" at the root", func(ctx context.Context) (bool, string) {
		_, err := env.Cluster("root").Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	restart := stopAPIServer(t, "east")
	const n = 3
	bound := spec.DeepCopy()
	bound.NodeName = "east"
	for i := range n - 1 {
		_, err := rootPods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("once-%d", i)}, Spec: *bound.DeepCopy()}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := rootPods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "placed"}, Spec: *spec.DeepCopy()}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 30*time.Second, "the placed pod Pending at the root, east unable to answer", func(ctx context.Context) (bool, string) {
		p, err := rootPods.Get(ctx, "placed", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "east: ") {
				return p.Spec.NodeName == "", fmt.Sprintf("on %q", p.Spec.NodeName)
			}
		}
		return false, fmt.Sprintf("conditions %+v", p.Status.Conditions)
	})
	// Bound to east at the root, and some retries later, still not failed.
	framework.Eventually(t, 30*time.Second, "the pods bound to east", func(ctx context.Context) (bool, string) {
		list, err := rootPods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == n && !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return p.Name != "placed" && p.Spec.NodeName != "east" }), fmt.Sprintf("%d pods", len(list.Items))
	})
	framework.Eventually(t, 20*time.Second, fmt.Sprintf("a %s event on each pod bound by hand", api.ReasonDelegateRetry), func(ctx context.Context) (bool, string) {
		events, err := env.Cluster("root").Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + api.ReasonDelegateRetry})
		if err != nil {
			return false, err.Error()
		}
		return len(events.Items) >= n-1, fmt.Sprintf("%d events", len(events.Items))
	})
	list, err := rootPods.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range list.Items {
		require.NotEqual(t, corev1.PodFailed, p.Status.Phase, "%s failed while east's API server was down: %s", p.Name, p.Status.Message)
	}

	require.NoError(t, restart())
	back := time.Now()
	framework.Eventually(t, 2*time.Minute, "the pods running once east's API server is back", func(ctx context.Context) (bool, string) {
		list, err := rootPods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			require.NotEqual(t, corev1.PodFailed, p.Status.Phase, "the pods did not run once east's API server was back: %s failed: %s", p.Name, p.Status.Message)
			if p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
			}
		}
		return len(list.Items) == n, fmt.Sprintf("%d pods", len(list.Items))
	})
	t.Logf("all %d Running at the root %s after east's API server restarted", n, time.Since(back).Round(time.Millisecond))
}
