package forward

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/test/framework"
)

// A pod deleted at the root is gone as soon as its delegates below are,
// not after its grace period; the grace period still reaches the leaf.
func TestDeleteDoesNotWaitOutGracePeriod(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	const grace = 600 // far longer than the test may wait
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "slow-to-stop"}, Spec: corev1.PodSpec{
		NodeSelector:                  map[string]string{"topology.kubernetes.io/region": "west"},
		TerminationGracePeriodSeconds: ptr.To[int64](grace),
		Containers:                    []corev1.Container{{Name: "app", Image: "nginx"}},
	}}
	root := env.Cluster("root").Client
	_, err := root.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, "root", ns, "", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 1 })
	leafName, _ := someDelegate(t, ns, "")

	// Watch the leaf's delegate to see the grace period it is deleted with.
	w, err := env.Cluster(leafName).Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String()})
	require.NoError(t, err)
	defer w.Stop()
	leafGrace := make(chan int64, 1)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.DeletionGracePeriodSeconds != nil {
				select {
				case leafGrace <- *p.DeletionGracePeriodSeconds:
				default:
				}
			}
		}
	}()

	start := time.Now()
	require.NoError(t, root.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	framework.EventuallyEvery(t, 50*time.Millisecond, 2*time.Minute, fmt.Sprintf("the root's pod gone without waiting out its %d s grace period", grace), func(ctx context.Context) (bool, string) {
		_, err := root.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	t.Logf("deleted at the root: gone there after %s (grace period %d s)", time.Since(start).Round(time.Millisecond), grace)
	select {
	case g := <-leafGrace:
		require.EqualValues(t, grace, g, "the leaf deletes its pod with the grace period given at the root")
	case <-time.After(10 * time.Second):
		t.Fatal("the leaf's pod was never seen deleted")
	}
	for _, c := range []string{"west", leafName} {
		require.Empty(t, pods(t, c, ns, ""), "nothing left in %s", c)
	}
}

// namespaceIdle is the agents' --namespace-idle here: a namespace an agent
// made for its parent's pods goes that long after it holds nothing.
const namespaceIdle = 20 * time.Second

// A namespace deleted at the root leaves nothing below: each agent deletes
// the namespace it made for the root's pods (and their ConfigMap) once it
// holds nothing of theirs, while a namespace of the same name that a
// child's admin made stays.
func TestNamespaceDeletedBelow(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root").Client
	ns := framework.KeptNamespace(t, root, "t")
	// east-2's admin made a namespace of that name (before Nestlet did).
	_, err := env.Cluster("east-2").Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	d := deployment(ns, "web", 4, "east")
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	_, err = root.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, "root", ns, "", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 4 })
	made, err := env.Cluster("east").Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err, "east made the namespace for the root's pods")
	require.Equal(t, "nestlet", made.Labels["app.kubernetes.io/managed-by"])

	require.NoError(t, root.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	start := time.Now()
	for _, c := range []string{"root", "east", "east-1"} {
		framework.Eventually(t, 3*time.Minute, fmt.Sprintf("namespace %s gone from %s", ns, c), func(ctx context.Context) (bool, string) {
			n, err := env.Cluster(c).Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err == nil {
				return false, fmt.Sprintf("phase %s, labels %v", n.Status.Phase, n.Labels)
			}
			return apierrors.IsNotFound(err), err.Error()
		})
	}
	t.Logf("gone below %s after the root's namespace was deleted (agents' --namespace-idle %s)", time.Since(start).Round(time.Second), namespaceIdle)
	own, err := env.Cluster("east-2").Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err, "east-2's own namespace stays")
	require.Nil(t, own.DeletionTimestamp, "east-2's own namespace stays")
	require.NoError(t, env.Cluster("east-2").Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
}
