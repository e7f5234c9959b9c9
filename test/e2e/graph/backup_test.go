package graph

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// Primary and backup: west-1 runs the root's west pods through west and
// through east. West loses its link to west-1, its only node: west's
// virtual node at the root goes NotReady, the root evicts and replaces
// those pods through east, and once the link is back west-1 drops the
// delegates west no longer has. Every replica runs exactly once in west-1
// in the end.
func TestBackupParentTakesOver(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	// Both of the root's children must offer region west before the
	// Deployment is made, or every replica may take the one that joined
	// first (this test runs first, while the tree settles).
	waitOffersWest(t, "root", "east", "west")
	const replicas = 6
	labels := map[string]string{"app": "backed"}
	// The pods (and so their delegates) tolerate being unreachable for
	// ever but not-ready for 5 s. West's only node is west-1: once it is
	// unreachable, west (whose controller manager would evict nothing
	// anyway, every node of west being down) keeps its delegates, and the
	// root can replace them only because west's virtual node says
	// NotReady. Without that, this test fails every time.
	tolerate := func(key string, seconds *int64) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
	}
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "backed"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"topology.kubernetes.io/region": "west"},
				Tolerations:  []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable, nil), tolerate(corev1.TaintNodeNotReady, ptr.To[int64](5))},
				Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
			}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// viaWest counts the replicas running in west-1 that came through west,
	// and checks that each root pod runs there exactly once.
	converged := func(ctx context.Context) (viaWest int, why string) {
		rootPods, err := env.Cluster("root").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err.Error()
		}
		live := map[string]bool{}
		for _, p := range rootPods.Items {
			if p.Status.Phase == corev1.PodFailed {
				continue // replaced; a failed pod stays, as in one cluster
			}
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				return 0, fmt.Sprintf("root pod %s is %s (deleting: %v)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil)
			}
			live[p.Name] = true
		}
		if len(live) != replicas {
			return 0, fmt.Sprintf("%d root pods", len(live))
		}
		leafPods, err := env.Cluster("west-1").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err.Error()
		}
		runs := map[string]int{}
		for _, p := range leafPods.Items {
			if p.DeletionTimestamp != nil {
				return 0, "west-1 pod " + p.Name + " terminating"
			}
			path := api.PodPath(&p)
			if len(path) == 0 || path[0] != "root" {
				continue
			}
			runs[p.Name]++ // the leaf pod has the root pod's name
			if path[1] == "west" {
				viaWest++
			}
		}
		for name := range live {
			if runs[name] != 1 {
				return 0, fmt.Sprintf("root pod %s runs %d times in west-1", name, runs[name])
			}
		}
		if len(runs) != replicas {
			return 0, fmt.Sprintf("west-1 runs %d distinct root pods", len(runs))
		}
		return viaWest, ""
	}
	var viaWest int
	framework.Eventually(t, 2*time.Minute, "converged before the cut", func(ctx context.Context) (bool, string) {
		var why string
		viaWest, why = converged(ctx)
		return why == "", why
	})
	require.NotZero(t, viaWest, "some replicas go through west")
	t.Logf("before the cut: %d of %d replicas through west", viaWest, replicas)

	link := tree.Link("west-1", "west")
	require.NoError(t, link.Cut())
	defer func() { _ = link.Restore() }()
	cut := time.Now()
	// The root replaces west's share through east.
	framework.EventuallyEvery(t, 500*time.Millisecond, 3*time.Minute, "east runs all replicas while west-1 is cut off from west", func(ctx context.Context) (bool, string) {
		list, err := env.Cluster("east").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == replicas, fmt.Sprintf("%d of %d running", running, replicas)
	})
	t.Logf("all replicas through east %s after the cut", time.Since(cut).Round(time.Second))

	require.NoError(t, link.Restore())
	healed := time.Now()
	framework.Eventually(t, 2*time.Minute, "converged after the heal, none through west", func(ctx context.Context) (bool, string) {
		viaWest, why := converged(ctx)
		return why == "" && viaWest == 0, fmt.Sprintf("%s (through west: %d)", why, viaWest)
	})
	t.Logf("converged %s after the heal: every replica once in west-1, all through east", time.Since(healed).Round(time.Millisecond))
}
