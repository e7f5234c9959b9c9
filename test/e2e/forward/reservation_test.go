package forward

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// Pods the tree has no place for, for a reason no summary shows (their
// host port is taken on every node of the west leaves), stay Pending at
// the root, as one cluster keeps them, with the reason of each level they
// tried, and never fail at any level: a bare pod, a Job's pod with
// backoffLimit 0, and a Deployment's two replicas. Nodes added to the
// leaves, as an autoscaler adds them, let every one of them run, once
// (the Job's pod runs to completion).
func TestNoPlaceStaysPending(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root")
	ns := framework.KeptNamespace(t, root.Client, "t")
	const port = 7003
	occupyHostPort(t, ns, port, "west-1", "west-2")

	spec := corev1.PodSpec{
		NodeSelector: map[string]string{"topology.kubernetes.io/region": "west"},
		Containers: []corev1.Container{{Name: "app", Image: "nginx",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: port}}}},
	}
	labels := map[string]string{"wants-port": "7003"}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns, Labels: labels}, Spec: *spec.DeepCopy()}
	_, err := root.Client.CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{})
	require.NoError(t, err)
	jobSpec := spec.DeepCopy()
	jobSpec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: ns},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: *jobSpec}},
	}
	_, err = root.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	dep := deployment(ns, "ported", 2, "west")
	dep.Spec.Template.Labels["wants-port"] = "7003"
	dep.Spec.Template.Spec.Containers[0].Ports = spec.Containers[0].Ports
	_, err = root.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { removeWorkloads(t, ns) })

	// Every level's reason, none Failed anywhere.
	pending := func(ctx context.Context) (bool, string) {
		if msg := failedAnywhere(ctx, ns); msg != "" {
			t.Fatalf("a pod failed: %s", msg)
		}
		list, err := root.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "wants-port=7003"})
		if err != nil {
			return false, err.Error()
		}
		if len(list.Items) != 4 {
			return false, fmt.Sprintf("%d root pods", len(list.Items))
		}
		for _, p := range list.Items {
			msg := scheduledMessage(&p)
			if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
				return false, fmt.Sprintf("%s: phase %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
			for _, want := range []string{"west: ", "west-1: ", "west-2: ", "free ports"} {
				if !strings.Contains(msg, want) {
					return false, fmt.Sprintf("%s: %q lacks %q", p.Name, msg, want)
				}
			}
		}
		return true, ""
	}
	framework.Eventually(t, 2*time.Minute, "the root keeps the pods Pending with every level's reason", pending)
	p, err := root.Client.CoreV1().Pods(ns).Get(ctx, "bare", metav1.GetOptions{})
	require.NoError(t, err)
	t.Logf("the bare pod's PodScheduled message: %s", scheduledMessage(p))
	// Past the agents' bounce timeout (10 s here), nothing has failed.
	time.Sleep(15 * time.Second)
	ok, last := pending(ctx)
	require.True(t, ok, last)
	j, err := root.Client.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
	require.NoError(t, err)
	require.Zero(t, j.Status.Failed, "the Job's backoffLimit is untouched")
	for _, c := range []string{"west", "west-1", "west-2"} {
		for _, d := range delegates(t, c, ns) {
			require.NotEqual(t, corev1.PodFailed, d.Status.Phase, "%s: delegate %s", c, d.Name)
		}
	}

	// Room appears below: two nodes in each west leaf.
	for _, leaf := range []string{"west-1", "west-2"} {
		for _, suffix := range []string{"c", "d"} {
			name := leaf + "-" + suffix
			_, err := env.Cluster(leaf).AddNode(ctx, launcher.NodeOptions{Name: name, Labels: map[string]string{
				"topology.kubernetes.io/region": "west", "topology.kubernetes.io/zone": leaf + "-" + suffix}})
			require.NoError(t, err)
			t.Cleanup(func() {
				removeWorkloads(t, ns)
				_ = env.Cluster(leaf).Client.CoreV1().Nodes().Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
			})
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, ns, "root", "west", "west-1", "west-2")
		}
	})
	waitPods(t, "root", ns, "wants-port=7003", 3*time.Minute, func(ps []corev1.Pod) bool {
		if msg := failedAnywhere(ctx, ns); msg != "" {
			t.Fatalf("a pod failed: %s", msg)
		}
		ran := 0
		for _, p := range ps {
			// kwok completes the Job's pod (restartPolicy Never).
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
				ran++
			}
		}
		return len(ps) == 4 && ran == 4
	})
	// Each ran once: one bound delegate per root pod in the leaves, on
	// the new nodes.
	var below []string
	for _, leaf := range []string{"west-1", "west-2"} {
		for _, d := range delegates(t, leaf, ns) {
			if d.Spec.NodeName != "" {
				below = append(below, d.Annotations[api.AnnotationParentPod]+" on "+d.Spec.NodeName)
			}
		}
	}
	require.Len(t, below, 4, "delegates in the west leaves: %v", below)
	j, err = root.Client.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
	require.NoError(t, err)
	require.Zero(t, j.Status.Failed)
}

// scheduledMessage is the message of the pod's PodScheduled condition.
func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}

// failedAnywhere names a Failed pod of ns in the root or the west
// clusters, or returns "".
func failedAnywhere(ctx context.Context, ns string) string {
	for _, c := range []string{"root", "west", "west-1", "west-2"} {
		list, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodFailed {
				return fmt.Sprintf("%s in %s: %s %s", p.Name, c, p.Status.Reason, p.Status.Message)
			}
		}
	}
	return ""
}

// removeWorkloads deletes the test's workloads at the root and waits
// (a while) for their delegates to leave the west leaves, so that the
// nodes added for them can go.
func removeWorkloads(t *testing.T, ns string) {
	ctx := context.WithoutCancel(t.Context())
	root := env.Cluster("root").Client
	_ = root.AppsV1().Deployments(ns).Delete(ctx, "ported", metav1.DeleteOptions{})
	_ = root.BatchV1().Jobs(ns).Delete(ctx, "once", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	_ = root.CoreV1().Pods(ns).Delete(ctx, "bare", metav1.DeleteOptions{})
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		n := 0
		for _, leaf := range []string{"west-1", "west-2"} {
			list, err := env.Cluster(leaf).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "wants-port=7003"})
			if err == nil {
				n += len(list.Items)
			}
		}
		if n == 0 {
			return
		}
		time.Sleep(time.Second)
	}
}

// dumpPods logs where each pod of ns is in clusters, for a failed test.
func dumpPods(t *testing.T, ns string, clusters ...string) {
	for _, c := range clusters {
		list, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(context.WithoutCancel(t.Context()), metav1.ListOptions{})
		if err != nil {
			t.Logf("%s: %v", c, err)
			continue
		}
		for _, p := range list.Items {
			t.Logf("%s: %s on %q, %s, hold %q reserved-on %q nominated %q: %s", c, p.Name, p.Spec.NodeName, p.Status.Phase,
				p.Annotations[api.AnnotationHold], p.Annotations[api.AnnotationReservedOn], p.Status.NominatedNodeName, scheduledMessage(&p))
		}
	}
}
