package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// A child whose Target is deleted while it is cut off from its parent
// keeps its Target (and runs its delegates) with a condition saying it
// cannot leave; once the parent is reachable again it removes its virtual
// node there and its delegates here, and nothing of it is left in either
// cluster. The root's pods that ran in east are replaced in west.
func TestTargetDeletedWhilePartitioned(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const replicas = 6
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "leaving", replicas), metav1.CreateOptions{})
	require.NoError(t, err)
	before := settle(t, ns, replicas, 2*time.Minute)
	require.NotZero(t, before["east"], "some replicas run in east: %v", before)

	targets, err := v1alpha1.NewTargetClient(env.Cluster("east").Config)
	require.NoError(t, err)
	name := tree.Targets["east"]
	link := tree.Link("east", "root")
	require.NoError(t, link.Cut())
	defer func() { _ = link.Restore() }()
	// Whatever happens below, east is a child of the root again for the
	// tests after this one.
	t.Cleanup(func() { rejoinEast(t) })

	require.NoError(t, targets.Delete(ctx, name, metav1.DeleteOptions{}))
	// The Target stays, saying why, and east keeps its delegates.
	var cond metav1.Condition
	framework.Eventually(t, time.Minute, "the Target says it cannot leave", func(ctx context.Context) (bool, string) {
		tg, err := targets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond = launcher.TargetCondition(tg, v1alpha1.ConditionReady)
		return tg.DeletionTimestamp != nil && cond.Reason == v1alpha1.ReasonParentUnreachable, fmt.Sprintf("deleting %v, Ready condition %+v", tg.DeletionTimestamp != nil, cond)
	})
	t.Logf("while cut off: %s: %s", cond.Reason, cond.Message)
	live, _, err := podsOf(ctx, "east", ns)
	require.NoError(t, err)
	require.Len(t, live, before["east"], "east keeps running its delegates while it cannot leave")

	// The root declares east unreachable and evicts its pods meanwhile.
	framework.Eventually(t, 2*time.Minute, "the root declares east unreachable", func(ctx context.Context) (bool, string) {
		n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeUnreachable {
				return true, ""
			}
		}
		return false, fmt.Sprintf("taints %v", n.Spec.Taints)
	})
	require.NoError(t, link.Restore())
	healed := time.Now()

	// Once reachable: no Target, no virtual node at the root, no delegate
	// and no identity left in east.
	framework.Eventually(t, 2*time.Minute, "east left the root completely after the heal", func(ctx context.Context) (bool, string) {
		if _, err := targets.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("the Target in east: %v", err)
		}
		if _, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("the virtual node east at the root: %v", err)
		}
		pods, err := env.Cluster("east").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods of %s in east", len(pods.Items), ns)
	})
	t.Logf("gone from both sides %s after the heal", time.Since(healed).Round(time.Millisecond))
	secrets, err := env.Cluster("east").Client.CoreV1().Secrets("nestlet-system").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range secrets.Items {
		require.NotEqual(t, "nestlet-identity-"+name, s.Name, "the identity in the root is forgotten")
	}
	// The root's pods all run in west.
	framework.Eventually(t, 2*time.Minute, "the root's replicas all run in west", func(ctx context.Context) (bool, string) {
		live, _, err := podsOf(ctx, "root", ns)
		if err != nil {
			return false, err.Error()
		}
		if len(live) != replicas {
			return false, fmt.Sprintf("%d of %d running at the root", len(live), replicas)
		}
		west, _, err := podsOf(ctx, "west", ns)
		if err != nil {
			return false, err.Error()
		}
		return len(west) == replicas, fmt.Sprintf("%d of %d running in west", len(west), replicas)
	})
}

// rejoinEast joins east to the root again if its Target is gone. It runs
// as a cleanup, when t.Context() is done: its waits poll a context of
// their own.
func rejoinEast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	targets, err := v1alpha1.NewTargetClient(env.Cluster("east").Config)
	require.NoError(t, err)
	if _, err := targets.Get(ctx, tree.Targets["east"], metav1.GetOptions{}); err == nil {
		// Still leaving: wait until it is gone.
		err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := targets.Get(ctx, tree.Targets["east"], metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "east's Target never went")
	}
	require.NoError(t, tree.Rejoin(ctx, "east", "root"), "joining east to the root again")
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, "east", metav1.GetOptions{})
		return err == nil && launcher.NodeReady(n), nil
	})
	require.NoError(t, err, fmt.Sprintf("east not Ready at the root after joining again (Target %s)", tree.Targets["east"]))
}
