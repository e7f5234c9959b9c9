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
