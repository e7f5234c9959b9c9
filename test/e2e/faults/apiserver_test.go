package faults

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/pkg/localcluster"
	"github.com/nestlet/nestlet/test/framework"
)

// outage is how long the root's API server stays down: several minutes,
// far longer than its controller manager's grace period and the agents'
// lease, and than their longest backoff (2 minutes).
const outage = 3 * time.Minute

func agent(t testing.TB, cluster string) *localcluster.Process {
	t.Helper()
	for _, p := range env.Processes() {
		if p.Name == cluster+"-nestlet" {
			return p
		}
	}
	t.Fatalf("no agent process for %s", cluster)
	return nil
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

	apiserver := env.Cluster("root").Process("kube-apiserver")
	require.NotNil(t, apiserver)
	apiserver.Stop(10 * time.Second)
	restarted := false
	defer func() {
		if !restarted {
			_ = apiserver.Restart()
		}
	}()
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
	require.NoError(t, apiserver.Restart())
	restarted = true
	back := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err := env.Cluster("root").Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	require.NoError(t, err, "the root's API server is not ready again")
	t.Logf("the root's API server ready %s after its restart", time.Since(back).Round(time.Millisecond))

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
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, c, metav1.GetOptions{})
			return err == nil && localcluster.NodeReady(n), nil
		})
		require.NoError(t, err, "%s not Ready at the root after the outage", c)
	}
	t.Logf("children Ready at the root %s after the restart", time.Since(back).Round(time.Millisecond))
}
