package tree

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
)

// TestPodToPodAcrossTheTree: a pod in east-1 reaches a pod in west-2 by
// its IP, and back, through the gateways' tunnels (east-1 -> east -> root
// -> west -> west-2, each opened by the child, all behind NAT), and each
// server sees the client's own pod IP: no address translation on the way.
func TestPodToPodAcrossTheTree(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	pods := map[string]*corev1.Pod{}
	for _, leaf := range []string{"east-1", "west-2"} {
		name := "pod-" + leaf
		_, err := root.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appSpec(map[string]string{"topology.kubernetes.io/zone": leaf})}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, leaf := range []string{"east-1", "west-2"} {
		name := "pod-" + leaf
		eventually(t, 3*time.Minute, name+" Ready at the root", func() (bool, string) {
			p, err := root.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			pods[leaf] = p
			return podReady(p) && p.Status.PodIP != "", fmt.Sprint(p.Status)
		})
		runsIn, _, err := leafOf(ctx, pods[leaf])
		require.NoError(t, err)
		require.Equal(t, leaf, runsIn)
	}
	for _, pair := range [][2]string{{"east-1", "west-2"}, {"west-2", "east-1"}} {
		client, server := pods[pair[0]], pods[pair[1]]
		path := fmt.Sprintf("/from-%s-%d", pair[0], time.Now().UnixNano())
		eventually(t, 2*time.Minute, fmt.Sprintf("%s reaches %s at %s", client.Name, server.Name, server.Status.PodIP), func() (bool, string) {
			out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", client.Name, "--", "/demo-app", "get", "http://"+server.Status.PodIP+":8080"+path)
			return err == nil && out == "hello from "+server.Name+"\n", fmt.Sprintf("%q %q %v", out, errOut, err)
		})
		logs := mustKubectl(t, "", "-n", ns, "logs", server.Name)
		want := "GET " + path + " from " + client.Status.PodIP + ":"
		require.True(t, strings.Contains(logs, want), "%s's logs do not show the request from %s's own IP (%q): %s", server.Name, client.Name, want, logs)
	}

	// Every child's Target says its tunnel is up, and the agents export
	// each tunnel's state.
	for _, e := range topo.Edges() {
		var last *v1alpha1.Target
		err := env.Cluster(e[0]).WaitTarget(ctx, tree.Targets[e[0]], time.Minute, func(tg *v1alpha1.Target) bool {
			last = tg
			return launcher.TargetCondition(tg, v1alpha1.ConditionTunnel).Status == metav1.ConditionTrue
		})
		require.NoError(t, err, "%s's tunnel to %s: %+v", e[0], e[1], last)
	}
	for _, parent := range []string{"root", "east", "west"} {
		eventually(t, time.Minute, "nestctl tree in "+parent+" shows every child's tunnel up", func() (bool, string) {
			out, err := env.Cluster(parent).Nestctl(ctx, "tree")
			return err == nil && strings.Count(out, "tunnel up") == 2, fmt.Sprint(out, err)
		})
	}
	resp, err := http.Get(tree.MetricsURL["east"])
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Regexp(t, `nestlet_gateway_last_handshake_timestamp_seconds\{peer="east-1"\} [1-9]`, string(body))
	require.Regexp(t, `nestlet_gateway_received_bytes_total\{peer="parent/[^"]+"\} [1-9]`, string(body))
}
