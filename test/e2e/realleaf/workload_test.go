package realleaf

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// containersOf returns the leaf runtime's containers of namespace ns, by
// state.
func containersOf(t *testing.T, ns string) map[string]int {
	t.Helper()
	all, err := realNode().Containers(t.Context())
	require.NoError(t, err)
	out := map[string]int{}
	for _, c := range all {
		if c.Labels["io.kubernetes.pod.namespace"] == ns {
			out[c.State.String()]++
		}
	}
	return out
}

// TestJobRunsOnce: a Job created at the root whose container exits 0
// completes at the root, and its container ran exactly once in the leaf:
// the leaf's runtime is watched from before the Job is made until its pod
// is terminal at every level, after which nothing can run it again (the
// Job is Complete, so it makes no pod; the pod and its delegate are
// Succeeded with restartPolicy Never, so neither is run again nor replaced).
func TestJobRunsOnce(t *testing.T) {
	ns := newNamespace(t)
	containers, err := framework.StartContainerWatch(t.Context(), []*launcher.RealNode{realNode()}, ns)
	require.NoError(t, err)
	defer containers.Stop()
	spec := appPodSpec("exit", "0")
	spec.Containers[0].ReadinessProbe = nil
	spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: ns},
		Spec:       batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), Template: corev1.PodTemplateSpec{Spec: spec}},
	}
	root := env.Cluster("root")
	_, err = root.Client.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "the Job Complete at the root", func(context.Context) (bool, string) {
		j, err := root.Client.BatchV1().Jobs(ns).Get(t.Context(), "once", metav1.GetOptions{})
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
	for _, c := range []string{"root", "leaf"} {
		framework.Eventually(t, time.Minute, "the Job's pod Succeeded in "+c, func(context.Context) (bool, string) {
			pods, err := env.Cluster(c).Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			var phases []corev1.PodPhase
			for _, p := range pods.Items {
				phases = append(phases, p.Status.Phase)
			}
			return len(phases) == 1 && phases[0] == corev1.PodSucceeded, fmt.Sprint(phases)
		})
	}
	j, err := root.Client.BatchV1().Jobs(ns).Get(t.Context(), "once", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(1), j.Status.Succeeded)
	require.Zero(t, j.Status.Failed)
	require.Zero(t, containers.Stop().N, "two runs of the Job's container at once in the leaf")
	require.Equal(t, 1, containers.Runs(), "runs of the Job's container the leaf's runtime reported while it was watched")
	require.Equal(t, map[string]int{"CONTAINER_EXITED": 1}, containersOf(t, ns), "containers of the Job in the leaf's runtime")
}

// TestDeleteStopsContainers: deleting a Deployment at the root stops its
// containers in the leaf's runtime.
func TestDeleteStopsContainers(t *testing.T) {
	ns := newNamespace(t)
	root := env.Cluster("root")
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: appPodSpec()},
		},
	}
	_, err := root.Client.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "2 ready replicas at the root", func(context.Context) (bool, string) {
		got, err := root.Client.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 2, fmt.Sprint(err)
	})
	require.Equal(t, 2, containersOf(t, ns)["CONTAINER_RUNNING"])

	require.NoError(t, root.Client.AppsV1().Deployments(ns).Delete(t.Context(), "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}))
	framework.Eventually(t, 2*time.Minute, "no container of the Deployment running in the leaf", func(context.Context) (bool, string) {
		got := containersOf(t, ns)
		return got["CONTAINER_RUNNING"] == 0, fmt.Sprint(got)
	})
}

// TestStats: the virtual node's /stats/summary at the root carries the real
// container's CPU and memory, and /metrics/resource its series.
func TestStats(t *testing.T) {
	ns, pod := runningApp(t)
	root := env.Cluster("root")
	framework.Eventually(t, time.Minute, "the pod's stats in the root's /stats/summary", func(context.Context) (bool, string) {
		raw, err := root.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", pod.Spec.NodeName, "proxy/stats/summary").DoRaw(context.Background())
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, raw)
		}
		var s statsv1alpha1.Summary
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, err.Error()
		}
		for _, p := range s.Pods {
			if p.PodRef.Namespace != ns || len(p.Containers) != 1 {
				continue
			}
			c := p.Containers[0]
			ok := c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil && *c.CPU.UsageCoreNanoSeconds > 0 &&
				c.Memory != nil && c.Memory.WorkingSetBytes != nil && *c.Memory.WorkingSetBytes > 0
			return ok, fmt.Sprintf("%+v", c)
		}
		return false, fmt.Sprintf("no pod of %s among %d", ns, len(s.Pods))
	})
	raw, err := root.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", pod.Spec.NodeName, "proxy/metrics/resource").DoRaw(t.Context())
	require.NoError(t, err)
	require.Regexp(t, fmt.Sprintf(`container_memory_working_set_bytes\{container="app",namespace="%s",pod="app"\} [1-9]`, ns), string(raw))
}

// TestEvictedJobPodsGo: the pods of a Job made at the root, evicted there
// (the Eviction API, as `kubectl drain` uses), are gone from the root
// within their grace period and a few seconds, as on one cluster. The
// root's Job controller holds each of its pods with a finalizer until it
// has seen the pod terminal, so the root's pod must end Failed, with the
// eviction's DisruptionTarget condition, before it can go: a pod removed
// while still Running would stay forever. The Job's pod failure policy
// ignores failures with that condition (its failed count stays 0) and its
// controller makes a new pod for each, which runs in the leaf.
func TestEvictedJobPodsGo(t *testing.T) {
	ns := newNamespace(t)
	root := env.Cluster("root")
	spec := appPodSpec()
	spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "evicted", Namespace: ns},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(int32(2)), Completions: ptr.To(int32(2)), BackoffLimit: ptr.To(int32(0)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{Spec: spec},
		},
	}
	_, err := root.Client.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	var first []corev1.Pod
	framework.Eventually(t, 2*time.Minute, "the Job's 2 pods Ready at the root", func(ctx context.Context) (bool, string) {
		pods, err := root.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=evicted"})
		if err != nil {
			return false, err.Error()
		}
		first = pods.Items
		ready := 0
		for _, p := range first {
			if podReady(&p) {
				ready++
			}
		}
		return ready == 2 && len(first) == 2, framework.DescribePods(first)
	})
	for _, p := range first {
		require.NoError(t, root.Client.CoreV1().Pods(ns).EvictV1(t.Context(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}}))
	}
	for _, p := range first {
		// A grace period of 2 s at every level, and a kubelet that
		// reports the end.
		framework.Eventually(t, 30*time.Second, "evicted pod "+p.Name+" gone from the root", func(ctx context.Context) (bool, string) {
			cur, err := root.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && cur.UID != p.UID) {
				return true, ""
			}
			if err != nil {
				return false, err.Error()
			}
			return false, fmt.Sprintf("phase %s, finalizers %v, conditions %+v", cur.Status.Phase, cur.Finalizers, cur.Status.Conditions)
		})
	}
	framework.Eventually(t, 2*time.Minute, "2 new pods Ready at the root, and no failure counted", func(ctx context.Context) (bool, string) {
		j, err := root.Client.BatchV1().Jobs(ns).Get(ctx, "evicted", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		require.Zero(t, j.Status.Failed, "failures the pod failure policy ignores were counted: %+v", j.Status)
		pods, err := root.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=evicted"})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, p := range pods.Items {
			if podReady(&p) && p.UID != first[0].UID && p.UID != first[1].UID {
				ready++
			}
		}
		return ready == 2, framework.DescribePods(pods.Items)
	})
}
