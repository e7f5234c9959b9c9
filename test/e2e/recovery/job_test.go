package recovery

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// containers counts the real node's containers of namespace ns by state.
func containers(ctx context.Context, ns string) (map[string]int, error) {
	all, err := env.Cluster("leaf").RealNode(realNode).Containers(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, c := range all {
		if c.Labels["io.kubernetes.pod.namespace"] == ns {
			out[c.State.String()]++
		}
	}
	return out, nil
}

// A Job whose container finishes while the leaf is cut off from mid
// completes at the root once the link is back, and neither that heal nor
// a restart of mid's API server afterwards runs it again: one pod per
// level, one container in the leaf's runtime.
func TestJobRunsOnceAcrossFaults(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: ns},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			NodeSelector:  map[string]string{"topology.kubernetes.io/zone": "real"},
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "work", Image: launcher.DemoAppImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"--exit-after=20s", "--exit-code=0"}}},
		}}},
	}
	root := env.Cluster("root").Client
	_, err := root.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	waitContainers(t, ns, "CONTAINER_RUNNING")

	link := tree.Link("leaf", "mid")
	require.NoError(t, link.Cut())
	cut := time.Now()
	defer func() { _ = link.Restore() }()
	waitContainers(t, ns, "CONTAINER_EXITED")
	t.Logf("the container exited %s after the cut", time.Since(cut).Round(time.Second))
	framework.Eventually(t, 2*time.Minute, "mid sees the leaf go away", func(ctx context.Context) (bool, string) {
		n, err := env.Cluster("mid").Client.CoreV1().Nodes().Get(ctx, "leaf", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !launcher.NodeReady(n), "the leaf is Ready in mid"
	})
	require.NoError(t, link.Restore())
	healed := time.Now()

	waitComplete(t, ns)
	t.Logf("complete at the root %s after the heal", time.Since(healed).Round(time.Millisecond))
	requireOnce(t, ns)

	// A fault after completion: mid's API server restarts.
	apiserver := env.Cluster("mid").Process("kube-apiserver")
	apiserver.Stop(10 * time.Second)
	time.Sleep(5 * time.Second)
	require.NoError(t, apiserver.Restart())
	waitWhole(t)
	requireOnce(t, ns)
}

// waitContainers waits until the leaf's runtime holds exactly one
// container of ns, in state.
func waitContainers(t *testing.T, ns, state string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "one container "+state+" in the leaf's runtime", func(ctx context.Context) (bool, string) {
		got, err := containers(ctx, ns)
		return err == nil && len(got) == 1 && got[state] == 1, fmt.Sprintf("the runtime holds %v (%v)", got, err)
	})
}

// waitComplete waits until Job once of ns is Complete at the root.
func waitComplete(t *testing.T, ns string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "the Job Complete at the root", func(ctx context.Context) (bool, string) {
		j, err := env.Cluster("root").Client.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", j.Status)
	})
}

// requireOnce checks that the Job ran once: succeeded once and never
// failed at the root, one Succeeded pod at every level, one exited
// container in the runtime.
func requireOnce(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	j, err := env.Cluster("root").Client.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(1), j.Status.Succeeded)
	require.Zero(t, j.Status.Failed)
	for _, c := range levels {
		pods, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var phases []string
		for _, p := range pods.Items {
			phases = append(phases, fmt.Sprintf("%s:%s", p.Name, p.Status.Phase))
		}
		require.Len(t, pods.Items, 1, "%s holds one pod of the Job: %v", c, phases)
		require.Equal(t, corev1.PodSucceeded, pods.Items[0].Status.Phase, c)
	}
	got, err := containers(ctx, ns)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"CONTAINER_EXITED": 1}, got, "one container run in the leaf's runtime")
}
