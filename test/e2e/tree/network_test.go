package tree

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// tunnelUpRE is a tunnel as `nestctl tree` shows it once up, with the
// round trip its userspace WireGuard timed.
var tunnelUpRE = regexp.MustCompile(`tunnel up \(handshake \S+ ago, round trip [0-9.e+]+ ms, [0-9.]+[KMG]?i?B in, [0-9.]+[KMG]?i?B out\)`)

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
		framework.Eventually(t, 3*time.Minute, name+" Ready at the root", func(context.Context) (bool, string) {
			p, err := root.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			pods[leaf] = p
			return podutil.IsPodReady(p) && p.Status.PodIP != "", fmt.Sprint(p.Status)
		})
		runsIn, _, err := leafOf(ctx, pods[leaf])
		require.NoError(t, err)
		require.Equal(t, leaf, runsIn)
	}
	for _, pair := range [][2]string{{"east-1", "west-2"}, {"west-2", "east-1"}} {
		client, server := pods[pair[0]], pods[pair[1]]
		path := fmt.Sprintf("/from-%s-%d", pair[0], time.Now().UnixNano())
		framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%s reaches %s at %s", client.Name, server.Name, server.Status.PodIP), func(context.Context) (bool, string) {
			out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", client.Name, "--", "/demo-app", "get", "http://"+server.Status.PodIP+":8080"+path)
			return err == nil && out == "hello from "+server.Name+"\n", fmt.Sprintf("%q %q %v", out, errOut, err)
		})
		logs := mustKubectl(t, "", "-n", ns, "logs", server.Name)
		want := "GET " + path + " from " + client.Status.PodIP + ":"
		require.True(t, strings.Contains(logs, want), "%s's logs do not show the request from %s's own IP (%q): %s", server.Name, client.Name, want, logs)
	}

	// A node's own packets reach too (a host-network pod here; the
	// kubelet's HTTP hooks alike): east-1's gateway gives them an address
	// of east-1's pod CIDR, which the tree routes back.
	hostSpec := appSpec(map[string]string{"topology.kubernetes.io/zone": "east-1"})
	hostSpec.HostNetwork = true
	hostSpec.Containers[0].Args = []string{"--port=18080"}
	hostSpec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 18080}}
	hostSpec.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromInt(18080)
	_, err := root.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "host-east-1"}, Spec: hostSpec}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 3*time.Minute, "host-east-1 Ready at the root", func(context.Context) (bool, string) {
		p, err := root.CoreV1().Pods(ns).Get(ctx, "host-east-1", metav1.GetOptions{})
		return err == nil && podutil.IsPodReady(p), fmt.Sprint(err)
	})
	server := pods["west-2"]
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("east-1's node reaches %s at %s", server.Name, server.Status.PodIP), func(context.Context) (bool, string) {
		out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", "host-east-1", "--", "/demo-app", "get", "http://"+server.Status.PodIP+":8080/from-east-1-node")
		return err == nil && out == "hello from "+server.Name+"\n", fmt.Sprintf("%q %q %v", out, errOut, err)
	})

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
		framework.Eventually(t, time.Minute, "nestctl tree in "+parent+" shows every child's tunnel up, its last handshake, round trip and bytes", func(context.Context) (bool, string) {
			out, err := env.Cluster(parent).Nestctl(ctx, "tree")
			return err == nil && len(tunnelUpRE.FindAllString(out, -1)) == 2, fmt.Sprint(out, err)
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

// TestServicesFromEveryLeaf: a Service and a headless Service made at the
// root over two Deployments, one pinned to east-2 and one to west-2. A
// client in east-1, which runs no replica, reaches both replicas through
// the Service's name (its copy in east-1, with the endpoints of east-2 and
// west-2 published there), and the headless name answers both pods' IPs.
func TestServicesFromEveryLeaf(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	answer, ips := webEastWest(t, ns)
	seen := map[string]int{}
	framework.Eventually(t, 2*time.Minute, "the client in east-1 reaches both replicas by the Service's name", func(context.Context) (bool, string) {
		sides, _, last := askWeb(t, ns, answer, 1)
		for side, n := range sides {
			seen[side] += n
		}
		return len(seen) == 2, fmt.Sprintf("seen %v; last %s", seen, last)
	})
	framework.Eventually(t, time.Minute, "the headless name answers both pods' IPs in east-1", func(context.Context) (bool, string) {
		out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", "client", "--", "/demo-app", "resolve", "web-all."+ns+".svc.cluster.local")
		got := map[string]bool{}
		for _, ip := range strings.Fields(out) {
			got[ip] = true
		}
		return err == nil && maps.Equal(got, ips), fmt.Sprintf("%q %q %v, want %v", out, errOut, err, ips)
	})
}

// TestServiceThroughAPartition: the same Service, and west cut off from
// the root for longer than the root's grace period. Requests from east-1
// fail within the client's timeout while west-2's endpoint still counts,
// then only east-2 answers once the root marks west's pods not ready (east
// and east-1 learn it through their remote endpoints); after the heal the
// tunnels come back by themselves and west-2 answers again.
func TestServiceThroughAPartition(t *testing.T) {
	ns := namespace(t)
	answer, _ := webEastWest(t, ns)
	west, err := env.Cluster("root").Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "side=west-2"})
	require.NoError(t, err)
	require.Len(t, west.Items, 1)
	westIP := west.Items[0].Status.PodIP
	seen := map[string]int{}
	framework.Eventually(t, 2*time.Minute, "both replicas answer", func(context.Context) (bool, string) {
		sides, _, last := askWeb(t, ns, answer, 1)
		for side, n := range sides {
			seen[side] += n
		}
		return len(seen) == 2, last
	})

	link := tree.Link("west", "root")
	require.NoError(t, link.Cut())
	cut := time.Now()
	defer func() { _ = link.Restore() }()
	failed := 0
	framework.Eventually(t, 3*time.Minute, "only east-2 answers while west is cut off, west-2's endpoint not ready in east-1", func(context.Context) (bool, string) {
		if ready := remoteReady(t, "east-1", ns, westIP); ready {
			return false, "west-2's endpoint still ready in east-1's remote slices"
		}
		sides, f, last := askWeb(t, ns, answer, 6)
		failed += f
		return sides["east-2"] == 6, fmt.Sprintf("%v, %d failed; last %s", sides, f, last)
	})
	t.Logf("only east-2 answers %s after the cut; %d requests failed meanwhile, each within the client's timeout", time.Since(cut).Round(time.Second), failed)

	require.NoError(t, link.Restore())
	healed := time.Now()
	framework.Eventually(t, 2*time.Minute, "west-2 answers again after the heal", func(context.Context) (bool, string) {
		sides, _, last := askWeb(t, ns, answer, 2)
		return sides["west-2"] > 0, fmt.Sprintf("%v; last %s", sides, last)
	})
	t.Logf("west-2 answers again %s after the heal", time.Since(healed).Round(time.Millisecond))
}

// webEastWest makes at the root two Deployments of one replica, web-east-2
// and web-west-2 (pinned to those zones), a Service web and a headless
// Service web-all over both, and a client pod pinned to east-1; it waits
// until they are Ready and returns each replica's answer by side and the
// replicas' IPs.
func webEastWest(t *testing.T, ns string) (map[string]string, map[string]bool) {
	t.Helper()
	ctx := t.Context()
	root := env.Cluster("root").Client
	for _, side := range []string{"east-2", "west-2"} {
		labels := map[string]string{"app": "web", "side": side}
		_, err := root.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web-" + side},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: appSpec(map[string]string{"topology.kubernetes.io/zone": side})}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for name, ip := range map[string]string{"web": "", "web-all": corev1.ClusterIPNone} {
		_, err := root.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := root.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: appSpec(map[string]string{"topology.kubernetes.io/zone": "east-1"})}, metav1.CreateOptions{})
	require.NoError(t, err)
	answer, ips := map[string]string{}, map[string]bool{}
	framework.Eventually(t, 3*time.Minute, "two Ready replicas and the client at the root", func(context.Context) (bool, string) {
		list, err := root.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range list.Items {
			p := &list.Items[i]
			if !podutil.IsPodReady(p) {
				continue
			}
			ready++
			if side := p.Labels["side"]; side != "" {
				answer[side], ips[p.Status.PodIP] = "hello from "+p.Name+"\n", true
			}
		}
		return ready == 3 && len(answer) == 2, fmt.Sprintf("%d Ready", ready)
	})
	return answer, ips
}

// askWeb makes n requests from the client in east-1 to http://web/ and
// returns how many each side answered, how many failed (each within the
// client's 5 s timeout), and the last output.
func askWeb(t *testing.T, ns string, answer map[string]string, n int) (map[string]int, int, string) {
	t.Helper()
	sides, failed, last := map[string]int{}, 0, ""
	for range n {
		out, errOut, err := kubectl(t.Context(), "root", "", "-n", ns, "exec", "client", "--", "/demo-app", "get", "http://web/from-east-1")
		last = fmt.Sprintf("%q %q %v", out, errOut, err)
		if err != nil {
			failed++
			continue
		}
		for side, a := range answer {
			if out == a {
				sides[side]++
			}
		}
	}
	return sides, failed, last
}

// remoteReady reports whether ip is a ready endpoint of Service web in the
// remote EndpointSlices of cluster.
func remoteReady(t *testing.T, cluster, ns, ip string) bool {
	t.Helper()
	list, err := env.Cluster(cluster).Client.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=web," + discoveryv1.LabelManagedBy + "=" + api.ManagedByRemoteEndpoints})
	require.NoError(t, err)
	for _, es := range list.Items {
		for _, e := range es.Endpoints {
			if slices.Contains(e.Addresses, ip) && ptr.Deref(e.Conditions.Ready, false) {
				return true
			}
		}
	}
	return false
}

// TestNodePortAtTheRoot: a NodePort Service made at the root over the
// replicas in east-2 and west-2 answers at the address of the root's
// nodes (the child clusters' virtual nodes: the root's nestlet-proxy,
// --service-node-ports) on its node port, from a client in east-1: each
// replica in turn, then one replica only under ClientIP session affinity.
func TestNodePortAtTheRoot(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	answer, _ := webEastWest(t, ns)
	svc, err := root.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-np"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	node, err := root.CoreV1().Nodes().Get(ctx, "west", metav1.GetOptions{})
	require.NoError(t, err)
	var addr string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addr = a.Address
		}
	}
	require.NotEmpty(t, addr, "west's InternalIP at the root")
	url := fmt.Sprintf("http://%s:%d/from-east-1", addr, svc.Spec.Ports[0].NodePort)
	ask := func() string {
		out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", "client", "--", "/demo-app", "get", url)
		if err != nil {
			return fmt.Sprintf("%q %v", errOut, err)
		}
		for side, a := range answer {
			if out == a {
				return side
			}
		}
		return fmt.Sprintf("unexpected %q", out)
	}
	seen := map[string]int{}
	framework.Eventually(t, 2*time.Minute, "the client in east-1 reaches both replicas at "+url, func(context.Context) (bool, string) {
		seen[ask()]++
		return seen["east-2"] > 0 && seen["west-2"] > 0, fmt.Sprint(seen)
	})

	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	_, err = root.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	var sticky string
	framework.Eventually(t, time.Minute, "ClientIP affinity: five answers in a row from one replica", func(context.Context) (bool, string) {
		answers := map[string]int{}
		for range 5 {
			answers[ask()]++
		}
		for side, n := range answers {
			sticky = side
			return n == 5 && (side == "east-2" || side == "west-2"), fmt.Sprint(answers)
		}
		return false, "no answer"
	})
	t.Logf("under ClientIP affinity every answer came from %s", sticky)
}
