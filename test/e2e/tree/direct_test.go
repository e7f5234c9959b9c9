package tree

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
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// pathOf returns the state of from's direct path to to, as from tells
// its parent parent (api.AnnotationGatewayPaths on its virtual node
// there): "" when it has none.
func pathOf(ctx context.Context, parent, from, to string) (api.DirectPath, error) {
	n, err := env.Cluster(parent).Client.CoreV1().Nodes().Get(ctx, from, metav1.GetOptions{})
	if err != nil {
		return api.DirectPath{}, err
	}
	var paths []api.DirectPath
	if raw := n.Annotations[api.AnnotationGatewayPaths]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &paths); err != nil {
			return api.DirectPath{}, err
		}
	}
	for _, p := range paths {
		if p.Cluster == to {
			return p, nil
		}
	}
	return api.DirectPath{}, nil
}

// waitPath waits until east-1's and west-2's paths to each other are
// direct, or not.
func waitPath(t testing.TB, direct bool, why string) {
	t.Helper()
	waitPaths(t, direct, why, [][3]string{{"east", "east-1", "west-2"}, {"west", "west-2", "east-1"}})
}

// waitPaths waits until the path of each end's second cluster (whose
// parent is its first) to its third is direct, or not.
func waitPaths(t testing.TB, direct bool, why string, ends [][3]string) {
	t.Helper()
	for _, end := range ends {
		framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s's path to %s %s", end[1], end[2], why), func(ctx context.Context) (bool, string) {
			p, err := pathOf(ctx, end[0], end[1], end[2])
			if err != nil {
				return false, err.Error()
			}
			return (p.State == api.DirectUp) == direct && p.State != "", fmt.Sprintf("%+v", p)
		})
	}
}

// Two leaves of different parents, each behind its NAT, reach each other
// by a direct path once their first packets crossed: their parents told
// each where the other's NAT maps it. A TCP stream between them survives
// the switch from the tree to the direct path, back when the direct path
// is cut, and again when a NAT that maps each flow to another port
// (symmetric) comes in front of west-2: then no direct path works, east-1
// says why, and its pods reach west-2's through the tree. The server sees
// the client's pod address all along.
func TestDirectPaths(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client

	waitPath(t, true, "direct")
	framework.Eventually(t, time.Minute, "nestctl tree in east shows east-1's direct path to west-2", func(ctx context.Context) (bool, string) {
		out, err := env.Cluster("east").Nestctl(ctx, "tree")
		line := ""
		for l := range strings.Lines(out) {
			if strings.Contains(l, "⇢ west-2: direct, to "+env.Cluster("west-2").Host.IP) {
				line = l
			}
		}
		// The round trip timed at the handshake that brought it up, and
		// that of east-1's own tunnel with east.
		return err == nil && strings.Contains(line, " ms when it came up") && strings.Contains(out, "round trip"), fmt.Sprint(out, err)
	})
	// east and west have no nodes of their own: no pods for a direct path
	// to carry, listed in no directory, they try none (the root's tree
	// shows their paths).
	out, err := env.Cluster("root").Nestctl(ctx, "tree")
	require.NoError(t, err)
	require.NotContains(t, out, "⇢", "a cluster of children only tried a direct path")
	resp, err := http.Get(tree.MetricsURL["east-1"])
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), `nestlet_gateway_path_direct{peer="direct/west-2",state="direct"} 1`)
	require.Contains(t, string(body), `nestlet_gateway_rtt_seconds{peer="direct/west-2"} `)
	require.Regexp(t, `nestlet_gateway_rtt_seconds\{peer="parent/[^"]+"\} `, string(body))

	// A server in west-2, a pod in east-1 to probe it from; the direct
	// path cut, so that the stream starts through the tree.
	for name, leaf := range map[string]string{"server": "west-2", "probe": "east-1"} {
		_, err = root.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appSpec(map[string]string{"topology.kubernetes.io/zone": leaf})}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	var server *corev1.Pod
	for _, name := range []string{"probe", "server"} {
		framework.Eventually(t, 3*time.Minute, name+" Ready", func(context.Context) (bool, string) {
			server, err = root.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && podutil.IsPodReady(server) && server.Status.PodIP != "", fmt.Sprint(err)
		})
	}
	east1, west2 := env.Cluster("east-1").Host, env.Cluster("west-2").Host
	require.NoError(t, east1.Cut(west2))
	t.Cleanup(func() { _ = east1.Heal(west2) })
	waitPath(t, false, "back to the tree while cut")

	spec := appSpec(map[string]string{"topology.kubernetes.io/zone": "east-1"})
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.Containers[0].ReadinessProbe = nil
	spec.Containers[0].Args = []string{"stream", fmt.Sprintf("http://%s:8080/stream/75", server.Status.PodIP)}
	_, err = root.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	var client *corev1.Pod
	framework.Eventually(t, 3*time.Minute, "the client streaming", func(context.Context) (bool, string) {
		client, err = root.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		if err != nil || client.Status.PodIP == "" {
			return false, fmt.Sprint(err)
		}
		logs, _, err := kubectl(ctx, "root", "", "-n", ns, "logs", "server")
		return err == nil && strings.Contains(logs, "GET /stream/75 from "+client.Status.PodIP+":"), logs
	})
	streaming := func(when string) {
		t.Helper()
		c, err := root.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.PodRunning, c.Status.Phase, "the stream ended before %s: it proves nothing of the switch (lengthen it)", when)
	}

	// Healed: the stream moves to the direct path; cut again: back.
	require.NoError(t, east1.Heal(west2))
	waitPath(t, true, "direct once healed")
	require.NoError(t, east1.Cut(west2))
	waitPath(t, false, "back to the tree, cut again")
	streaming("the direct path was cut")
	require.NoError(t, east1.Heal(west2))
	waitPath(t, true, "direct once healed again")

	// Behind a symmetric NAT, west-2 gets no direct path.
	require.NoError(t, west2.SymmetricNAT(true))
	t.Cleanup(func() { _ = west2.SymmetricNAT(false) })
	framework.Eventually(t, 3*time.Minute, "east-1's direct path to west-2 failed", func(ctx context.Context) (bool, string) {
		p, err := pathOf(ctx, "east", "east-1", "west-2")
		return err == nil && p.State == api.DirectFailed && strings.Contains(p.Reason, "symmetric"), fmt.Sprintf("%+v %v", p, err)
	})
	out, err = env.Cluster("east").Nestctl(ctx, "tree")
	require.NoError(t, err)
	require.Contains(t, out, "⇢ west-2: through the tree, direct path failed")
	probe, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", "probe", "--", "/demo-app", "get", "http://"+server.Status.PodIP+":8080/through-the-tree")
	require.NoError(t, err, errOut)
	require.Equal(t, "hello from server\n", probe)
	streaming("the symmetric NAT came")

	framework.Eventually(t, 3*time.Minute, "the client's stream ended", func(context.Context) (bool, string) {
		client, err = root.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		return err == nil && (client.Status.Phase == corev1.PodSucceeded || client.Status.Phase == corev1.PodFailed), fmt.Sprint(err)
	})
	logs := mustKubectl(t, "", "-n", ns, "logs", "client")
	require.Equal(t, corev1.PodSucceeded, client.Status.Phase, "the stream broke on a change of path: %s", logs)
	require.Contains(t, logs, "stream: intact")
	t.Log(strings.TrimSpace(logs))

	require.NoError(t, west2.SymmetricNAT(false))
	waitPath(t, true, "direct once the symmetric NAT is gone")
}
