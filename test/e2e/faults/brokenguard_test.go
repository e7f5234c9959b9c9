package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/test/framework"
)

// TestFaultWatchCountsABrokenGuard: the fault watch's count of pods run
// twice at once is a measurement, not a 0 written down. East's agent is
// replaced by a deliberately broken build (the build tag
// nestlet_skip_duplicate_guard: provider/forward forwards every pod twice)
// while a Deployment runs in east; the watch must count exactly one
// duplicate per pod (reportFaults), and see them while they last.
// East's agent is the real build again before the test ends.
func TestFaultWatchCountsABrokenGuard(t *testing.T) {
	const replicas = 2
	ns, watch := namespaceWatched(t, replicas)
	ctx := t.Context()
	broken, err := framework.BuildAgentWithTags(t.TempDir(), "nestlet_skip_duplicate_guard")
	require.NoError(t, err)

	a := agent(t, "east")
	realBuild := a.Binary()
	a.Stop(10 * time.Second)
	require.NoError(t, a.RestartWith(broken))
	t.Cleanup(func() {
		a.Stop(10 * time.Second)
		require.NoError(t, a.RestartWith(realBuild), "east's agent as the real build again")
	})
	t.Cleanup(func() { removeEverywhere(t, ns) })

	d := deployment(ns, "twice", replicas)
	d.Spec.Template.Spec.Affinity = regions("east")
	_, err = env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	var live map[string]string
	framework.Eventually(t, 2*time.Minute, "east runs two delegates of each pod with the broken build", func(ctx context.Context) (bool, string) {
		live, _, err = podsOf(ctx, "east", ns)
		return err == nil && len(live) == 2*replicas, fmt.Sprint(live, err)
	})
	t.Logf("east with the broken build runs %v", live)
	// Watched while they happen: the watch counts them open already.
	open := watch.Report()
	t.Logf("the fault watch while they run: %s", open.Duplicates)
	require.Equal(t, replicas, open.Duplicates.N, "duplicates the fault watch counted while they ran: %s", open.Duplicates)
}

// removeEverywhere deletes the Deployments of ns at the root, waits until
// the root's pods are gone (each with the delegate the agent deletes), then
// deletes what is left of ns in east (the broken build's second
// delegates), and waits until none is left.
func removeEverywhere(t *testing.T, ns string) {
	ctx := context.Background()
	root, east := env.Cluster("root").Client, env.Cluster("east").Client
	require.NoError(t, root.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	gone := func(c string) wait.ConditionWithContextFunc {
		return func(ctx context.Context) (bool, error) {
			list, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		}
	}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, gone("root")), "pods of %s left at the root", ns)
	require.NoError(t, east.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, gone("east")), "pods of %s left in east", ns)
}
