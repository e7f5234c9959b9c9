package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
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

// After bounces, the children ask to be avoided for the owner of the
// bounced pods, level by level, until the root keeps the Deployment's pod
// Pending with that reason instead of sending it down again (no ping-pong).
func TestBounceRecordsAvoidance(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root")
	occupyHostPort(t, ns, 7002, "west-1", "west-2")
	dep := deployment(ns, "port-bound", 1, "west")
	dep.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 7002}}
	_, err := root.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = root.Client.AppsV1().Deployments(ns).Delete(context.WithoutCancel(ctx), "port-bound", metav1.DeleteOptions{})
	})
	framework.EventuallyEvery(t, 500*time.Millisecond, 3*time.Minute, "west asks the root to avoid it for the ReplicaSet", func(ctx context.Context) (bool, string) {
		rss, err := root.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=port-bound"})
		if err != nil || len(rss.Items) == 0 {
			return false, fmt.Sprintf("no ReplicaSet yet (%v)", err)
		}
		rsUID := string(rss.Items[0].UID)
		n, err := root.Client.CoreV1().Nodes().Get(ctx, "west", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var avoid map[string]string
		if err := json.Unmarshal([]byte(n.Annotations[api.AnnotationAvoid]), &avoid); err != nil {
			return false, fmt.Sprintf("ReplicaSet %s: west's avoid annotation: %v", rsUID, err)
		}
		_, ok := avoid[rsUID]
		return ok, fmt.Sprintf("ReplicaSet %s: west avoids %v", rsUID, avoid)
	})

	// The root now keeps the replacement Pending, saying why.
	waitPods(t, "root", ns, "app=port-bound", time.Minute, func(ps []corev1.Pod) bool {
		for _, p := range ps {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "asks to be avoided") {
					return true
				}
			}
		}
		return false
	})
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
