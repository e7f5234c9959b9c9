package forward

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/test/framework"
)

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	args = append([]string{"--kubeconfig", env.Cluster("root").KubeconfigPath}, args...)
	out, err := exec.CommandContext(t.Context(), env.Binaries.Kubectl, args...).CombinedOutput()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// What DESIGN.md shows a user typing against the root: a plain Deployment,
// patched with a region nodeSelector, lands in that region's leaves.
func TestPlainKubectlDeployment(t *testing.T) {
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	kubectl(t, "create", "deployment", "web", "-n", ns, "--image=nginx", "--replicas=6")
	kubectl(t, "patch", "deployment", "web", "-n", ns, "-p", `{"spec":{"template":{"spec":{"nodeSelector":{"topology.kubernetes.io/region":"west"}}}}}`)
	waitPods(t, "root", ns, "app=web", 2*time.Minute, func(ps []corev1.Pod) bool {
		running := 0
		for _, p := range ps {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeSelector["topology.kubernetes.io/region"] == "west" {
				running++
			}
		}
		return running == 6
	})
	out := kubectl(t, "get", "pods", "-n", ns, "-o", "wide", "--field-selector=status.phase=Running")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if strings.Contains(line, "Terminating") {
			continue // pods of the first, unpinned revision on their way out
		}
		require.Contains(t, strings.Fields(line), "west", line)
	}
	leafPods := len(delegates(t, "west-1", ns)) + len(delegates(t, "west-2", ns))
	require.GreaterOrEqual(t, leafPods, 6)
}

// A pod that fits nowhere stays Pending at the root, and the scheduler's
// message names the reason for each kind of node.
func TestFitsNowhereSaysWhy(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "north", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"topology.kubernetes.io/region": "north"},
			Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
	_, err := env.Cluster("root").Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var msg string
	framework.Eventually(t, time.Minute, "the pod unschedulable at the root", func(ctx context.Context) (bool, string) {
		p, err := env.Cluster("root").Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				msg = c.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("conditions %+v", p.Status.Conditions)
	})
	require.Contains(t, msg, "east: no group matches region=north")
	require.Contains(t, msg, "west: no group matches region=north")
	require.Contains(t, msg, "didn't match Pod's node affinity/selector", "the real node, as the built-in plugin says it")
	describe := kubectl(t, "describe", "pod", "-n", ns, pod.Name)
	require.Contains(t, describe, "FailedScheduling")
	require.Contains(t, describe, "east: no group matches region=north")
}
