package forward

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/test/framework"
)

// A pod whose name is taken in the child by a pod of the child's own gets a
// delegate under another name, and both live.
func TestDelegateNameCollision(t *testing.T) {
	ctx := t.Context()
	east := env.Cluster("east")
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t", east.Client)
	local := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "clash", Namespace: ns, Labels: map[string]string{"origin": "local"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"no-such": "node"}, // stays Pending, harmlessly
			Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
	_, err := east.Client.CoreV1().Pods(ns).Create(ctx, local, metav1.CreateOptions{})
	require.NoError(t, err)

	remote := local.DeepCopy()
	remote.Labels = map[string]string{"origin": "root"}
	remote.Spec.NodeSelector = map[string]string{"topology.kubernetes.io/region": "east"}
	_, err = env.Cluster("root").Client.CoreV1().Pods(ns).Create(ctx, remote, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, "root", ns, "origin=root", time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 1 })

	ds := delegates(t, "east", ns)
	require.Len(t, ds, 1)
	require.NotEqual(t, "clash", ds[0].Name)
	require.True(t, strings.HasPrefix(ds[0].Name, "clash-"), ds[0].Name)
	mine, err := east.Client.CoreV1().Pods(ns).Get(ctx, "clash", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "local", mine.Labels["origin"], "the child's own pod is untouched")
}

// The agents export forwarding metrics.
func TestMetrics(t *testing.T) {
	// Forwarding happened in the tests before; make sure of one pod anyway.
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	_, err := env.Cluster("root").Client.AppsV1().Deployments(ns).Create(t.Context(), deployment(ns, "metered", 2, "east"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, "root", ns, "app=metered", time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 2 })

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, metricsURL["east"], nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(body)
	for _, metric := range []string{
		`nestlet_pods_forwarded_total{target="` + targetOf["east"] + `"}`,
		`nestlet_forward_latency_seconds_count{target="` + targetOf["east"] + `"}`,
		`nestlet_pod_status_updates_total{target="` + targetOf["east"] + `"}`,
	} {
		require.Contains(t, text, metric)
	}
	require.NotContains(t, text, `nestlet_pods_forwarded_total{target="`+targetOf["east"]+`"} 0`+"\n")
}
