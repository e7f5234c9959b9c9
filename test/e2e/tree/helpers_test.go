package tree

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// namespace makes a namespace at the root for the test
// (framework.KeptNamespace), once every child is Ready in its parent
// without a taint of the node lifecycle: a test starts on a whole tree
// whatever the one before it left.
func namespace(t *testing.T) string {
	t.Helper()
	framework.NeedRealNodes(t)
	framework.Eventually(t, 3*time.Minute, "the tree is whole", func(ctx context.Context) (bool, string) {
		for _, e := range topo.Edges() {
			n, err := env.Cluster(e[1]).Client.CoreV1().Nodes().Get(ctx, e[0], metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !launcher.NodeReady(n) {
				return false, e[0] + " is not Ready in " + e[1]
			}
			for _, taint := range n.Spec.Taints {
				if taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady {
					return false, fmt.Sprintf("%s is tainted %s in %s", e[0], taint.Key, e[1])
				}
			}
		}
		return true, ""
	})
	return framework.KeptNamespace(t, env.Cluster("root").Client, "t")
}

// appSpec is a pod of the demo app (an HTTP server on 8080, Ready on
// /healthz) whose node has the given labels.
func appSpec(nodeSelector map[string]string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector:                  nodeSelector,
		TerminationGracePeriodSeconds: ptr.To(int64(2)),
		Containers: []corev1.Container{{
			Name:            "app",
			Image:           launcher.DemoAppImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(8080)}},
				PeriodSeconds: 1,
			},
		}},
	}
}

// leafOf follows the delegates of the root's pod down to the cluster whose
// own node runs it; it returns that cluster's name and its pod.
func leafOf(ctx context.Context, rootPod *corev1.Pod) (string, *corev1.Pod, error) {
	cluster, uid, ns := rootPod.Spec.NodeName, string(rootPod.UID), rootPod.Namespace
	for range 5 {
		c := env.Cluster(cluster)
		if c == nil {
			return "", nil, fmt.Errorf("pod %s bound to %q, not a cluster of the tree", rootPod.Name, cluster)
		}
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, err
		}
		var next *corev1.Pod
		for i := range list.Items {
			if strings.HasSuffix(list.Items[i].Annotations[api.AnnotationOrigin], "/"+uid) {
				next = &list.Items[i]
			}
		}
		if next == nil {
			return "", nil, fmt.Errorf("no delegate of %s (%s) in %s", rootPod.Name, uid, cluster)
		}
		if env.Cluster(next.Spec.NodeName) == nil {
			return cluster, next, nil
		}
		cluster, uid = next.Spec.NodeName, string(next.UID)
	}
	return "", nil, fmt.Errorf("delegate chain of %s/%s deeper than 5", ns, rootPod.Name)
}

// kubectl runs kubectl against cluster and returns stdout, stderr and the
// error.
func kubectl(ctx context.Context, cluster, stdin string, args ...string) (string, string, error) {
	return framework.Kubectl(ctx, env, env.Cluster(cluster), stdin, args...)
}

// mustKubectl is kubectl against the root that fails the test on error.
func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectl(t.Context(), "root", stdin, args...)
	require.NoError(t, err, "kubectl %s at the root: %s", strings.Join(args, " "), errOut)
	return out
}
