package forward

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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// A Service at the root follows its pods down, and every level lists the
// pods below it as its endpoints: through scale down and up, a pod turning
// unready, a delegate deleted in a leaf, and the Service's deletion.
func TestServiceFollowsPodsAcrossLevels(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root").Client
	_, err := root.AppsV1().Deployments(ns).Create(ctx, spreadDeployment(ns, "web", 6), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.CoreV1().Services(ns).Create(ctx, service(ns, "web", false), metav1.CreateOptions{})
	require.NoError(t, err)

	waitPods(t, "root", ns, "app=web", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 6 && len(ps) == 6 })
	t.Logf("6 replicas: endpoints settled at every level %s after the pods ran", waitEndpoints(t, ns, "web", 6).Round(time.Millisecond))
	regions := map[string]int{}
	for _, p := range pods(t, "root", ns, "app=web") {
		regions[p.Spec.NodeName]++
	}
	require.Len(t, regions, 2, "replicas in both regions: %v", regions)
	require.Subset(t, holding(t, ns, "web"), []string{"east", "west"})
	for _, c := range holding(t, ns, "web") {
		svc, err := env.Cluster(c).Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, svc.Labels[api.LabelTargetUID], "%s: made by Nestlet", c)
		require.NotEqual(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "%s allocates its own ClusterIP", c)
		wantPath := "root," + c
		if strings.Contains(c, "-") {
			wantPath = "root," + strings.Split(c, "-")[0] + "," + c
		}
		require.Equal(t, wantPath, svc.Annotations[api.AnnotationPath])
	}

	scale(t, ns, "web", 2)
	waitPods(t, "root", ns, "app=web", 2*time.Minute, func(ps []corev1.Pod) bool { return len(ps) == 2 && countRunning(ps) == 2 })
	t.Logf("scaled to 2: endpoints settled after %s", waitEndpoints(t, ns, "web", 2).Round(time.Millisecond))
	scale(t, ns, "web", 6)
	waitPods(t, "root", ns, "app=web", 2*time.Minute, func(ps []corev1.Pod) bool { return len(ps) == 6 && countRunning(ps) == 6 })
	t.Logf("back to 6: endpoints settled after %s", waitEndpoints(t, ns, "web", 6).Round(time.Millisecond))

	// One pod turns unready in its leaf: not ready at every level.
	leafName, leafPod := someDelegate(t, ns, "web")
	setReady(t, leafName, leafPod, corev1.ConditionFalse)
	t.Logf("one pod unready in %s: endpoints settled after %s", leafName, waitEndpoints(t, ns, "web", 5).Round(time.Millisecond))
	setReady(t, leafName, leafPod, corev1.ConditionTrue)
	waitEndpoints(t, ns, "web", 6)

	// A delegate deleted in a leaf: its root pod fails and is replaced.
	leafName, leafPod = someDelegate(t, ns, "web")
	require.NoError(t, env.Cluster(leafName).Client.CoreV1().Pods(ns).Delete(ctx, leafPod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	waitPods(t, "root", ns, "app=web", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 6 })
	t.Logf("delegate deleted in %s: endpoints settled after %s", leafName, waitEndpoints(t, ns, "web", 6).Round(time.Millisecond))

	// The Service deleted at the root: every copy below goes.
	require.NoError(t, root.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	framework.EventuallyEvery(t, 100*time.Millisecond, time.Minute, "every copy of web gone", func(context.Context) (bool, string) {
		left := holding(t, ns, "web")
		return len(left) == 0, fmt.Sprintf("copies left in %v", left)
	})
}

// A headless Service's endpoints reach the root the same way, and its
// copies stay headless.
func TestHeadlessServiceAcrossLevels(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root").Client
	_, err := root.AppsV1().Deployments(ns).Create(ctx, spreadDeployment(ns, "db", 4), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.CoreV1().Services(ns).Create(ctx, service(ns, "db", true), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, "root", ns, "app=db", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 4 && len(ps) == 4 })
	waitEndpoints(t, ns, "db", 4)
	for _, c := range holding(t, ns, "db") {
		svc, err := env.Cluster(c).Client.CoreV1().Services(ns).Get(ctx, "db", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, c)
	}
}

// A user's own Service of the same name in a leaf is left untouched, and
// the collision is reported there and in the leaf's parent.
func TestServiceNameTakenInLeaf(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t", env.Cluster("east-1").Client, env.Cluster("east-2").Client)
	own := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns, Labels: map[string]string{"owner": "leaf-team"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "leaf-own"}, Ports: []corev1.ServicePort{{Port: 9}}}}
	for _, leafName := range []string{"east-1", "east-2"} {
		_, err := env.Cluster(leafName).Client.CoreV1().Services(ns).Create(ctx, own, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	root := env.Cluster("root").Client
	_, err := root.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "api", 2, "east"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.CoreV1().Services(ns).Create(ctx, service(ns, "api", false), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, "root", ns, "app=api", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 2 })

	leafName, _ := someDelegate(t, ns, "api")
	waitEvent(t, leafName, ns, "api", api.ReasonServiceNameTaken)
	waitEvent(t, "east", ns, "api", api.ReasonServiceNameTaken)
	mine, err := env.Cluster(leafName).Client.CoreV1().Services(ns).Get(ctx, "api", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, own.Spec.Selector, mine.Spec.Selector, "the leaf's own Service is untouched")
	require.Equal(t, own.Labels, mine.Labels)

	// The root's Service goes; the leaves' own stay.
	require.NoError(t, root.CoreV1().Services(ns).Delete(ctx, "api", metav1.DeleteOptions{}))
	framework.EventuallyEvery(t, 100*time.Millisecond, time.Minute, "east's copy of api gone", func(context.Context) (bool, string) {
		left := holding(t, ns, "api")
		return !slices.Contains(left, "east"), fmt.Sprintf("held in %v", left)
	})
	require.Equal(t, []string{"east-1", "east-2"}, holding(t, ns, "api"))
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	s, err := env.Cluster("root").Client.AppsV1().Deployments(ns).GetScale(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	s.Spec.Replicas = replicas
	_, err = env.Cluster("root").Client.AppsV1().Deployments(ns).UpdateScale(t.Context(), name, s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// someDelegate returns a leaf running a pod of app (of any app when app
// is ""), and that pod.
func someDelegate(t *testing.T, ns, app string) (string, corev1.Pod) {
	t.Helper()
	selector := ""
	if app != "" {
		selector = "app=" + app
	}
	for _, c := range []string{"east-1", "east-2", "west-1", "west-2"} {
		for _, p := range pods(t, c, ns, selector) {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				return c, p
			}
		}
	}
	t.Fatalf("no running pod of %s in any leaf", app)
	return "", corev1.Pod{}
}

// setReady sets the Ready condition of a leaf's pod, as its kubelet would
// after a readiness probe.
func setReady(t *testing.T, cluster string, pod corev1.Pod, status corev1.ConditionStatus) {
	t.Helper()
	framework.EventuallyEvery(t, 100*time.Millisecond, 30*time.Second, fmt.Sprintf("Ready=%s set on %s in %s", status, pod.Name, cluster), func(ctx context.Context) (bool, string) {
		p, err := env.Cluster(cluster).Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		for i, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				p.Status.Conditions[i].Status = status
				p.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = status == corev1.ConditionTrue
		}
		_, err = env.Cluster(cluster).Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// waitEvent waits for an event with reason on the Service ns/name in cluster.
func waitEvent(t *testing.T, cluster, ns, name, reason string) {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": "Service", "involvedObject.name": name, "reason": reason}.AsSelector().String()
	framework.Eventually(t, time.Minute, fmt.Sprintf("a %s event on Service %s/%s in %s", reason, ns, name, cluster), func(ctx context.Context) (bool, string) {
		evs, err := env.Cluster(cluster).Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(evs.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		t.Logf("%s: %s", cluster, evs.Items[0].Message)
		return true, ""
	})
}
