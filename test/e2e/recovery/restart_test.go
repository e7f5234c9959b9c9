package recovery

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// midDown is how long mid's API server or etcd stays stopped: longer than
// the agents' 5 s reconnect threshold; with the API server's own start-up,
// shorter than the 40 s grace period of the root and of mid.
const midDown = 10 * time.Second

// A restart of mid's API server, then of its etcd (data kept): the root's
// pods never change phase or readiness, every level keeps exactly its
// pods, and mid's summary at the root is fresh again within seconds.
func TestMidControlPlaneRestart(t *testing.T) {
	for _, process := range []string{"kube-apiserver", "etcd"} {
		t.Run(process, func(t *testing.T) {
			ctx := t.Context()
			ns := namespace(t)
			_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "steady", 4), metav1.CreateOptions{})
			require.NoError(t, err)
			before := settle(t, ns, 4, 2*time.Minute)
			rec := recordPhases(t, ns)
			summary := midSummary(t)
			require.NotNil(t, summary, "mid has a summary at the root")

			p := env.Cluster("mid").Process(process)
			require.NotNil(t, p, "mid runs its own %s", process)
			p.Stop(10 * time.Second)
			restarted := false
			defer func() {
				if !restarted {
					_ = p.Restart()
				}
			}()
			deadline := time.Now().Add(midDown)
			for time.Now().Before(deadline) {
				live, _, _, err := livePods(ctx, "leaf", ns)
				require.NoError(t, err)
				require.Equal(t, before["leaf"], live, "the leaf keeps running its pods while mid's %s is down", process)
				time.Sleep(2 * time.Second)
			}
			require.NoError(t, p.Restart())
			restarted = true
			back := time.Now()

			framework.EventuallyEvery(t, 200*time.Millisecond, 2*time.Minute, "mid's API server ready again", func(ctx context.Context) (bool, string) {
				body, err := env.Cluster("mid").Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
				return err == nil && string(body) == "ok", fmt.Sprintf("%q %v", body, err)
			})
			ready := time.Since(back)
			// Summaries recover: mid reports again, with what it had.
			framework.EventuallyEvery(t, 200*time.Millisecond, time.Minute, "mid's summary at the root fresh and whole again", func(context.Context) (bool, string) {
				fresh := midSummary(t)
				if fresh == nil {
					return false, "none"
				}
				at, err := time.Parse(time.RFC3339, fresh.Time)
				return err == nil && at.After(back) && fresh.Clusters == summary.Clusters && maps.Equal(groupNodes(summary), groupNodes(fresh)),
					fmt.Sprintf("was %+v, now %+v", summary, fresh)
			})
			reported := time.Since(back)
			settle(t, ns, 4, time.Minute)
			sameAs(t, ns, before)
			waitWhole(t)
			require.Empty(t, rec.Changes(), "no pod at the root changed phase or readiness")
			t.Logf("mid's %s down %s: its API server ready %s after the restart, its summary fresh at the root after %s",
				process, midDown, ready.Round(time.Millisecond), reported.Round(time.Millisecond))
		})
	}
}

// midSummary returns the summary of mid's virtual node at the root.
func midSummary(t testing.TB) *api.Summary {
	n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(t.Context(), "mid", metav1.GetOptions{})
	if err != nil || !launcher.NodeReady(n) {
		return nil
	}
	s, ok := api.ParseSummary(n)
	if !ok {
		return nil
	}
	return s
}

// groupNodes counts the nodes of a summary by group labels.
func groupNodes(s *api.Summary) map[string]int {
	out := map[string]int{}
	for _, g := range s.Groups {
		out[g.Labels["topology.kubernetes.io/zone"]] += g.Nodes
	}
	return out
}
