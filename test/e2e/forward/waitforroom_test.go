package forward

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// East-1 can grow (its Target, and east's, say spec.waitForRoom): a pod
// with no place in the tree waits in east-1, Pending, where a cluster
// autoscaler sees it, for as long as the root's pod waits (past the time
// an unasked reservation is collected), and is withdrawn from east-2,
// which cannot grow. A pod deleted at the root while it waits leaves east
// and east-1 at once. A node added to east-1, as the autoscaler adds it,
// runs the waiting delegate itself.
func TestWaitForRoom(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root")
	ns := framework.KeptNamespace(t, root.Client, "t")
	const port = 7004
	occupyHostPort(t, ns, port, "east-1", "east-2")
	for _, name := range []string{"waits", "gone"} {
		_, err := root.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"wants-port": "7004"}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"topology.kubernetes.io/region": "east"},
				Containers: []corev1.Container{{Name: "app", Image: "nginx",
					Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: port}}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, ns, "root", "east", "east-1", "east-2")
		}
	})

	// waiting returns the UID of pod's delegate waiting in cluster (held,
	// unbound, and unschedulable there: what an autoscaler scales for).
	waiting := func(ctx context.Context, cluster, pod string) (types.UID, string) {
		list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelTargetUID})
		if err != nil {
			return "", err.Error()
		}
		for _, d := range list.Items {
			if d.Annotations[api.AnnotationParentPod] != ns+"/"+pod {
				continue
			}
			if d.Spec.NodeName == "" && d.Annotations[api.AnnotationHold] == api.HoldHeld {
				return d.UID, ""
			}
			return "", fmt.Sprintf("%s's delegate in %s on %q, hold %q", pod, cluster, d.Spec.NodeName, d.Annotations[api.AnnotationHold])
		}
		return "", fmt.Sprintf("no delegate of %s in %s", pod, cluster)
	}
	var first types.UID
	framework.Eventually(t, 2*time.Minute, "the pods wait in east-1 and at the root", func(ctx context.Context) (bool, string) {
		for _, name := range []string{"waits", "gone"} {
			p, err := root.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
				return false, fmt.Sprintf("%s: %s on %q", name, p.Status.Phase, p.Spec.NodeName)
			}
			for _, c := range []string{"east", "east-1"} {
				uid, why := waiting(ctx, c, name)
				if uid == "" {
					return false, why
				}
				if name == "waits" && c == "east-1" {
					first = uid
				}
			}
			if uid, _ := waiting(ctx, "east-2", name); uid != "" {
				return false, name + " still held in east-2, which cannot grow"
			}
		}
		return true, ""
	})

	// Deleted at the root, a waiting pod leaves east and east-1 at once.
	require.NoError(t, root.Client.CoreV1().Pods(ns).Delete(ctx, "gone", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	framework.Eventually(t, 30*time.Second, "the deleted pod's delegates are withdrawn", func(ctx context.Context) (bool, string) {
		for _, c := range []string{"east", "east-1"} {
			if uid, _ := waiting(ctx, c, "gone"); uid != "" {
				return false, "still held in " + c
			}
		}
		return true, ""
	})

	// Past the age at which an unasked reservation is collected, the root
	// still asks, and the same delegate still waits in east-1.
	time.Sleep(heldMaxAge + 20*time.Second)
	uid, why := waiting(ctx, "east-1", "waits")
	require.Equal(t, first, uid, "the same delegate waits in east-1: %s", why)
	p, err := root.Client.CoreV1().Pods(ns).Get(ctx, "waits", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodPending, p.Status.Phase)
	require.Contains(t, scheduledMessage(p), "east-1", "the root's pod names the child it waits in")

	// The autoscaler adds a node: the waiting delegate runs there.
	_, err = env.Cluster("east-1").AddNode(ctx, launcher.NodeOptions{Name: "east-1-c", Labels: map[string]string{
		"topology.kubernetes.io/region": "east", "topology.kubernetes.io/zone": "east-1-c"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx := context.WithoutCancel(ctx)
		_ = root.Client.CoreV1().Pods(ns).Delete(cctx, "waits", metav1.DeleteOptions{})
		framework.Eventually(t, time.Minute, "the pod leaves east-1", func(ctx context.Context) (bool, string) {
			list, err := env.Cluster("east-1").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "wants-port=7004"})
			return err == nil && len(list.Items) == 0, fmt.Sprintf("%v", err)
		})
		_ = env.Cluster("east-1").Client.CoreV1().Nodes().Delete(cctx, "east-1-c", metav1.DeleteOptions{})
	})
	framework.Eventually(t, 2*time.Minute, "the waiting pod runs", func(ctx context.Context) (bool, string) {
		p, err := root.Client.CoreV1().Pods(ns).Get(ctx, "waits", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("%s: %s", p.Status.Phase, scheduledMessage(p))
	})
	d, err := env.Cluster("east-1").Client.CoreV1().Pods(ns).Get(ctx, "waits", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, first, d.UID, "the delegate that waited is the one that runs")
	require.Equal(t, "east-1-c", d.Spec.NodeName)
}
