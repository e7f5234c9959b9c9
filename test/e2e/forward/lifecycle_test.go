package forward

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// A Job of 3 completions completes once at the root, with exactly 3 pods:
// a completed pod never runs again.
func TestJobCompletesOnce(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root")
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: ns},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](3),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  map[string]string{"topology.kubernetes.io/region": "east"},
				Containers:    []corev1.Container{{Name: "work", Image: "busybox"}},
			}},
		},
	}
	_, err := root.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "the job complete", func(ctx context.Context) (bool, string) {
		j, err := root.Client.BatchV1().Jobs(ns).Get(ctx, "batch", metav1.GetOptions{})
		require.NoError(t, err, "job did not complete")
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", j.Status)
	})
	j, err := root.Client.BatchV1().Jobs(ns).Get(ctx, "batch", metav1.GetOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 3, j.Status.Succeeded)
	require.Zero(t, j.Status.Failed)
	ps := pods(t, "root", ns, "job-name=batch")
	require.Len(t, ps, 3, "exactly the 3 pods of the 3 completions")
	for _, p := range ps {
		require.Equal(t, corev1.PodSucceeded, p.Status.Phase)
	}
	total := 0
	for _, c := range []string{"east-1", "east-2"} {
		total += len(delegates(t, c, ns))
	}
	require.Equal(t, 3, total, "one leaf pod per completion")
}

// A delegate deleted below, not by Nestlet, fails its parent pod with a
// stated reason at every level, and the root's controller replaces it.
func TestDelegateDeletedBelowFailsParent(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root")
	_, err := root.Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "single", 1, "west"), metav1.CreateOptions{})
	require.NoError(t, err)
	first := waitPods(t, "root", ns, "app=single", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 1 })[0]

	var leafName string
	var leafPod corev1.Pod
	for _, c := range []string{"west-1", "west-2"} {
		if ds := delegates(t, c, ns); len(ds) == 1 {
			leafName, leafPod = c, ds[0]
		}
	}
	require.NotEmpty(t, leafName, "the pod runs in a west leaf")
	require.NoError(t, env.Cluster(leafName).Client.CoreV1().Pods(ns).Delete(ctx, leafPod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))

	framework.EventuallyEvery(t, 100*time.Millisecond, time.Minute, "the root pod failed with reason "+api.ReasonDelegateDeleted, func(ctx context.Context) (bool, string) {
		p, err := root.Client.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
		require.False(t, apierrors.IsNotFound(err), "root pod not failed with reason %s: %v", api.ReasonDelegateDeleted, err)
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == api.ReasonDelegateDeleted, fmt.Sprintf("phase %s, reason %q", p.Status.Phase, p.Status.Reason)
	})
	p, err := root.Client.CoreV1().Pods(ns).Get(ctx, first.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, p.Status.Message, leafName)

	// The ReplicaSet replaces it.
	waitPods(t, "root", ns, "app=single", 2*time.Minute, func(ps []corev1.Pod) bool {
		for _, q := range ps {
			if q.Name != first.Name && q.Status.Phase == corev1.PodRunning {
				return true
			}
		}
		return false
	})
}

// A pod bound by hand (no scheduler, so no reservation) to a virtual node
// whose leaves cannot place it, for a reason no summary shows (its host
// port is taken on every node there), bounces back: the root pod fails
// with the leaf scheduler's reason, visible in kubectl describe, as a pod
// bound by hand to a node without the free port fails at its kubelet. A
// pod the scheduler places stays Pending instead (reservation_test.go).
func TestBounceBack(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root")
	occupyHostPort(t, ns, 7001, "west-1", "west-2")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "port-bound", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:   "west",
			Containers: []corev1.Container{{Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 7001}}}},
		},
	}
	_, err := root.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "the pod bounced back", func(ctx context.Context) (bool, string) {
		p, err := root.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodFailed, fmt.Sprintf("phase %s", p.Status.Phase)
	})
	p, err := root.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "west", p.Spec.NodeName)
	require.Equal(t, api.ReasonBounced, p.Status.Reason)
	require.Contains(t, p.Status.Message, "free ports")

	out, err := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", root.KubeconfigPath, "describe", "pod", "-n", ns, pod.Name).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), api.ReasonBounced)
	require.Contains(t, string(out), "free ports")
	for _, leaf := range []string{"west-1", "west-2"} {
		require.Empty(t, delegates(t, leaf, ns), "the bounced delegate is removed from %s", leaf)
	}
}

// occupyHostPort runs a pod holding port on every node of the leaves.
func occupyHostPort(t *testing.T, ns string, port int32, leaves ...string) {
	t.Helper()
	for _, leaf := range leaves {
		c := env.Cluster(leaf)
		require.NoError(t, c.EnsureNamespace(t.Context(), ns))
		nodes, err := c.Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: "type=kwok"})
		require.NoError(t, err)
		for _, n := range nodes.Items {
			_, err := c.Client.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("holds-%d-%s", port, n.Name)},
				Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "app", Image: "nginx",
					Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: port}}}}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
}

// A pod that has already passed through a cluster is refused there.
func TestLoopRefused(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "looping", Namespace: ns, Annotations: map[string]string{api.AnnotationPath: "west,east,root"}},
		Spec: corev1.PodSpec{
			NodeName:   "east", // bound directly, as a scheduler would
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
	_, err := root.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.EventuallyEvery(t, 100*time.Millisecond, time.Minute, "the loop refused", func(ctx context.Context) (bool, string) {
		p, err := root.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == api.ReasonLoop, fmt.Sprintf("phase %s, reason %q", p.Status.Phase, p.Status.Reason)
	})
	p, err := root.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, p.Status.Message, "already passed through cluster east")
	require.Empty(t, delegates(t, "east", ns))
}

// Killing the east agent (-9) during a 100-pod scale-up and restarting it
// ends with exactly 100 pods at the root and one delegate per pod below.
func TestAgentKilledDuringScaleUp(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root, east := env.Cluster("root"), env.Cluster("east")
	_, err := root.Client.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "scale", 100, "east"), metav1.CreateOptions{})
	require.NoError(t, err)
	// Kill once forwarding is under way.
	waitPods(t, "east", ns, "", time.Minute, func(ps []corev1.Pod) bool { return len(ps) >= 10 })
	var agentPID int
	for _, p := range env.Processes() {
		if p.Name == "east-nestlet" {
			if exited, _ := p.Exited(); !exited {
				agentPID = p.PID()
				require.NoError(t, syscall.Kill(agentPID, syscall.SIGKILL))
				require.Eventually(t, func() bool { exited, _ := p.Exited(); return exited }, 10*time.Second, 10*time.Millisecond)
			}
		}
	}
	require.NotZero(t, agentPID, "east agent found")
	t.Logf("killed the east agent while %d delegates existed", len(delegates(t, "east", ns)))
	_, err = env.StartAgent(ctx, east)
	require.NoError(t, err)

	waitPods(t, "root", ns, "app=scale", 3*time.Minute, func(ps []corev1.Pod) bool { return len(ps) == 100 && countRunning(ps) == 100 })
	rootUIDs := map[string]bool{}
	for _, p := range pods(t, "root", ns, "app=scale") {
		rootUIDs[string(p.UID)] = true
	}
	origins := map[string]int{}
	for _, d := range delegates(t, "east", ns) {
		origins[d.Annotations[api.AnnotationOrigin]]++
	}
	require.Len(t, origins, 100, "one delegate per root pod in east")
	for o, n := range origins {
		require.Equal(t, 1, n, "delegates of %s", o)
		require.True(t, rootUIDs[o[strings.LastIndex(o, "/")+1:]], "delegate of a pod the root does not have: %s", o)
	}
	// A reservation made below for a held pod of east that the restart
	// replaced is withdrawn by east's scheduler once that pod is gone: not
	// at once, but well before its agent would collect it (api.HeldMaxAge).
	framework.Eventually(t, 30*time.Second, "one leaf pod per root pod", func(ctx context.Context) (bool, string) {
		leaf, held := 0, []string{}
		for _, c := range []string{"east-1", "east-2"} {
			for _, d := range delegates(t, c, ns) {
				leaf++
				if d.Annotations[api.AnnotationHold] == api.HoldHeld {
					held = append(held, fmt.Sprintf("%s/%s of %s", c, d.Name, d.Annotations[api.AnnotationOrigin]))
				}
			}
		}
		return leaf == 100, fmt.Sprintf("%d leaf pods; held: %v", leaf, held)
	})
}
