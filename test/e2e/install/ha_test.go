package install

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nestlet/nestlet/test/framework"
)

// agentLease is the Lease the agent's replicas elect their leader with
// (the chart's agent name).
const agentLease = release + "-agent"

// TestAgentLeaderKilled: east's agent runs as two replicas, one elected.
// Deleting the leader's pod while 10 pods made at the root run in east-1
// (the root's virtual node east is this agent's): the other replica leads
// within the 15 s the design allows (it hands over on a graceful stop, so
// it is seconds), no pod at the root changes phase or readiness meanwhile,
// and the new leader forwards a new pod.
func TestAgentLeaderKilled(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	root, east := env.Cluster("root"), env.Cluster("east")
	webDeployment(t, ns, "steady", 10)
	atRoot := watchStates(t, root.Client, ns, "app=steady")

	leader := func(ctx context.Context) (string, error) {
		l, err := east.Client.CoordinationV1().Leases(chartNamespace).Get(ctx, agentLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", err
		}
		pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_") // the pod's hostname, then a UUID
		return pod, nil
	}
	old, err := leader(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, old, "no replica of east's agent leads")
	agents, err := east.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=agent"})
	require.NoError(t, err)
	require.Len(t, agents.Items, 2, "east's agent replicas")

	start := time.Now()
	require.NoError(t, east.Client.CoreV1().Pods(chartNamespace).Delete(ctx, old, metav1.DeleteOptions{}))
	var now string
	framework.EventuallyEvery(t, 200*time.Millisecond, time.Minute, "another replica takes the lease from "+old, func(ctx context.Context) (bool, string) {
		now, err = leader(ctx)
		return err == nil && now != "" && now != old, fmt.Sprintf("leader %q (%v)", now, err)
	})
	took := time.Since(start)
	t.Logf("%s leads %s after %s's pod was deleted", now, took.Round(10*time.Millisecond), old)
	require.Less(t, took, 15*time.Second, "the other replica took over late")

	require.NoError(t, east.WaitTargetReady(ctx, "root", 2*time.Minute))
	webDeployment(t, ns, "after-failover", 1)
	require.Empty(t, atRoot(t), "pods at the root disturbed by the leader's change")

	// The Deployment replaced the pod: two replicas again, for the tests
	// after this one.
	waitReplicas(t, "east", "agent", 2)
}

// waitReplicas waits until exactly n pods of a component run ready in the
// cluster, none terminating.
func waitReplicas(t *testing.T, cluster, component string, n int) {
	t.Helper()
	c := env.Cluster(cluster)
	framework.EventuallyEvery(t, time.Second, 2*time.Minute, fmt.Sprintf("%s: %d ready replicas of the %s", cluster, n, component), func(ctx context.Context) (bool, string) {
		pods, err := c.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != n {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || !podutil.IsPodReady(&p) {
				return false, p.Name + " terminating or not ready"
			}
		}
		return true, ""
	})
}

// TestProxyReplicas: the root's proxy runs as two replicas behind one
// NodePort, and east's tunnel is held by one of them. `kubectl logs` at the
// root, ten times, lands on either (the NodePort picks) and always reaches
// the pod in east-1; with one replica deleted, east's agent reopens its
// tunnel to the one left or its replacement, and logs work again.
func TestProxyReplicas(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	root := env.Cluster("root")
	pod := webDeployment(t, ns, "web", 1)[0]
	logs := func() error {
		out, errOut, err := framework.Kubectl(ctx, env, root, "", "-n", ns, "logs", pod.Name)
		if err != nil {
			return fmt.Errorf("%w: %s", err, errOut)
		}
		if !strings.Contains(out, "demo-app: listening on :8080") {
			return fmt.Errorf("logs: %q", out)
		}
		return nil
	}
	for i := range 10 {
		require.NoError(t, logs(), "kubectl logs #%d", i+1)
	}

	proxies, err := root.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=proxy"})
	require.NoError(t, err)
	require.Len(t, proxies.Items, proxyReplicas)
	require.NoError(t, root.Client.CoreV1().Pods(chartNamespace).Delete(ctx, proxies.Items[0].Name, metav1.DeleteOptions{}))
	framework.EventuallyEvery(t, 2*time.Second, 3*time.Minute, "kubectl logs after a proxy replica was deleted", func(context.Context) (bool, string) {
		err := logs()
		return err == nil, fmt.Sprint(err)
	})
	waitReplicas(t, "root", "proxy", proxyReplicas)
	for i := range 5 {
		require.NoError(t, logs(), "kubectl logs #%d after the replica was replaced", i+1)
	}
}
