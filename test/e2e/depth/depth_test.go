package depth

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
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

// A plain Deployment at the root runs in the only leaf, three levels down:
// each replica's delegates are found level by level, bound to the next
// cluster's virtual node, with the path root,l1,l2,l3; kubectl logs and
// exec at the root reach the leaf's pod through three tunnels. The root,
// made only of clusters (--child-taint-effect=PreferNoSchedule), has
// ready, schedulable nodes as the Kubernetes e2e framework counts them
// (Ready, not cordoned, no NoSchedule or NoExecute taint), while l1 keeps
// the taint on its own child's node.
func TestThreeHopsDown(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root")
	framework.Eventually(t, time.Minute, "l1 is a ready, schedulable node of the root", func(ctx context.Context) (bool, string) {
		n, err := root.Client.CoreV1().Nodes().Get(ctx, "l1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		blocking := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		})
		return ready && !n.Spec.Unschedulable && !blocking, fmt.Sprintf("ready %v, unschedulable %v, taints %v", ready, n.Spec.Unschedulable, n.Spec.Taints)
	})
	l2, err := env.Cluster("l1").Client.CoreV1().Nodes().Get(ctx, "l2", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, l2.Spec.Taints, api.ProviderTaint(), "l1 keeps the provider taint NoSchedule")
	ns := framework.KeptNamespace(t, root.Client, "t")
	labels := map[string]string{"app": "deep"}
	_, err = root.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "deep", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(4)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var rootPods []corev1.Pod
	framework.Eventually(t, 2*time.Minute, "the 4 replicas Running at the root", func(ctx context.Context) (bool, string) {
		list, err := root.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=deep"})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		rootPods = list.Items
		return running == 4 && len(list.Items) == 4, fmt.Sprintf("%d pods, %d running", len(list.Items), running)
	})

	var leafPod string
	for _, p := range rootPods {
		require.Equal(t, "l1", p.Spec.NodeName, "root pod %s", p.Name)
		uid := string(p.UID)
		for i, cluster := range chain[1:] {
			d := delegateOf(t, cluster, ns, uid)
			require.Equal(t, strings.Join(chain[:i+2], ","), d.Annotations[api.AnnotationPath], "delegate of %s in %s", p.Name, cluster)
			require.Equal(t, corev1.PodRunning, d.Status.Phase, "delegate of %s in %s", p.Name, cluster)
			if cluster == "l3" {
				require.Contains(t, []string{"l3-a", "l3-b"}, d.Spec.NodeName)
				leafPod = d.Name
			} else {
				require.Equal(t, chain[i+2], d.Spec.NodeName, "delegate of %s in %s", p.Name, cluster)
			}
			uid = string(d.UID)
		}
	}

	// The last replica's logs and exec, from the root.
	name := rootPods[len(rootPods)-1].Name
	f, err := os.OpenFile(env.Cluster("l3").KwokLogsFile, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "%s stdout F three hops down\n", time.Now().UTC().Format(time.RFC3339Nano))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, kubectl(t, "l3", "logs", "-n", ns, leafPod, "--tail=1"), kubectl(t, "root", "logs", "-n", ns, name, "--tail=1"))
	require.Contains(t, kubectl(t, "root", "logs", "-n", ns, name, "--tail=1"), "three hops down")
	require.Equal(t, "hello from l3\n", kubectl(t, "root", "exec", "-n", ns, name, "--", "echo", "hello from l3"))

	// kubectl get nodes at the root shows l1 carrying the leaf's region.
	n, err := root.Client.CoreV1().Nodes().Get(ctx, "l1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "deep", n.Labels["topology.kubernetes.io/region"])

	// The agents that created the delegates in l1, l2 and l3 were served
	// at the controllers' priority level, as the chart's FlowSchemas say.
	for _, cluster := range chain[1:] {
		dispatched, err := framework.DispatchedByFlowSchema(ctx, env.Cluster(cluster))
		require.NoError(t, err)
		require.Positive(t, dispatched["nestlet-launcher-agent/workload-high"], "%s: %v", cluster, dispatched)
	}
}

// delegateOf returns the pod in cluster whose origin is the pod with uid.
func delegateOf(t *testing.T, cluster, ns, uid string) corev1.Pod {
	t.Helper()
	list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range list.Items {
		if strings.HasSuffix(p.Annotations[api.AnnotationOrigin], "/"+uid) {
			return p
		}
	}
	t.Fatalf("no delegate of pod %s in %s", uid, cluster)
	return corev1.Pod{}
}

// kubectl runs kubectl against cluster and returns its output.
func kubectl(t *testing.T, cluster string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), env.Binaries.Kubectl, append([]string{"--kubeconfig", env.Cluster(cluster).KubeconfigPath}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "kubectl %s against %s: %s", strings.Join(args, " "), cluster, errOut.String())
	return out.String()
}
