package kubelet

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// runPod creates a pod pinned to region in a new namespace of the root,
// waits until it runs at the root, and returns the namespace and the
// cluster and name of the pod that really runs it (in a kwok leaf).
func runPod(t testing.TB, region string) (ns, leaf, leafPod string) {
	t.Helper()
	ctx := t.Context()
	root := env.Cluster("root")
	ns = framework.KeptNamespace(t, root.Client, "t")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"topology.kubernetes.io/region": region},
			Containers:   []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}
	_, err := root.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "pod "+ns+"/app Running at the root", func(ctx context.Context) (bool, string) {
		p, err := root.Client.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Sprintf("phase %s", p.Status.Phase)
	})

	// Follow the delegates down to the cluster whose node is kwok's.
	p, err := root.Client.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
	require.NoError(t, err)
	cluster, uid := p.Spec.NodeName, string(p.UID)
	for range 5 {
		c := env.Cluster(cluster)
		require.NotNil(t, c, "pod bound to %q, not a cluster of the tree", cluster)
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var next *corev1.Pod
		for i := range list.Items {
			if strings.HasSuffix(list.Items[i].Annotations[api.AnnotationOrigin], "/"+uid) {
				next = &list.Items[i]
			}
		}
		require.NotNil(t, next, "no delegate of %s in %s", uid, cluster)
		if env.Cluster(next.Spec.NodeName) == nil {
			return ns, cluster, next.Name
		}
		cluster, uid = next.Spec.NodeName, string(next.UID)
	}
	t.Fatalf("delegate chain of %s/app deeper than 5", ns)
	return "", "", ""
}

// kubectl runs kubectl against cluster and returns stdout, stderr and the
// error.
func kubectl(ctx context.Context, cluster, stdin string, args ...string) (string, string, error) {
	return framework.Kubectl(ctx, env, env.Cluster(cluster), stdin, args...)
}

// mustKubectl is kubectl that fails the test on error.
func mustKubectl(t *testing.T, cluster, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectl(t.Context(), cluster, stdin, args...)
	require.NoError(t, err, "kubectl %s against %s: %s", strings.Join(args, " "), cluster, errOut)
	return out
}

// appendLog appends lines to the kwok log file of cluster, in the CRI
// format kwok reads, stamped at.
func appendLog(t testing.TB, cluster string, at time.Time, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(env.Cluster(cluster).KwokLogsFile, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	for _, l := range lines {
		_, err := fmt.Fprintf(f, "%s stdout F %s\n", at.UTC().Format(time.RFC3339Nano), l)
		require.NoError(t, err)
	}
}
