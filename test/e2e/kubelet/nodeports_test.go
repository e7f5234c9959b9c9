package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// Behind the root's nestlet-proxy, east's virtual node advertises a port
// of its own (recorded in kube-public/nestlet-proxy-ports), not the
// proxy's shared one, and there the node-level routes that name no pod
// are served through east's tunnel: the root's API server answers
// nodes/east/proxy/stats/summary with east's summary, and
// /metrics/resource, where the shared port answers 404. West serves the
// root directly and has no port on the proxy.
func TestNodeLevelRoutesThroughTheProxy(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root").Client
	info, err := root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	shared := info.Data[api.ClusterInfoProxyKubeletEndpoint]
	host, _, err := net.SplitHostPort(shared)
	require.NoError(t, err)

	var ports map[string]string
	framework.EventuallyEvery(t, time.Second, time.Minute, "east advertises the proxy's port for it", func(ctx context.Context) (bool, string) {
		cm, err := root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "nestlet-proxy-ports", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ports = cm.Data
		advertised := kubeletEndpoint(t, "root", "east")
		return advertised == net.JoinHostPort(host, cm.Data["east"]), fmt.Sprintf("east advertises %s; the proxy's ports: %v, shared %s", advertised, ports, shared)
	})
	require.NotContains(t, ports, "west", "west serves its kubelet API directly")

	raw, err := root.CoreV1().RESTClient().Get().Resource("nodes").Name("east").SubResource("proxy").Suffix("stats/summary").DoRaw(ctx)
	require.NoError(t, err, "stats/summary of east at the root: %s", raw)
	var sum statsv1alpha1.Summary
	require.NoError(t, json.Unmarshal(raw, &sum), "%s", raw)
	require.Equal(t, "east", sum.Node.NodeName)
	raw, err = root.CoreV1().RESTClient().Get().Resource("nodes").Name("east").SubResource("proxy").Suffix("metrics/resource").DoRaw(ctx)
	require.NoError(t, err, "metrics/resource of east at the root: %s", raw)

	// The shared port still refuses them, saying where they are served.
	require.Equal(t, 404, get(t, shared, "/stats/summary", env.Cluster("root").Config))
}

// TestDirectChildPinned: west serves the root its kubelet API directly,
// where the root's operator pinned it (the proxy's --direct-nodes
// west=IP:PORT, recorded in kube-public/nestlet-proxy-ports): its node
// advertises that endpoint, and west, with its own node credential,
// cannot advertise another port there.
func TestDirectChildPinned(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root").Client
	cm, err := root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "nestlet-proxy-ports", metav1.GetOptions{})
	require.NoError(t, err)
	pin, ok := strings.CutPrefix(cm.Data[".direct"], "west=")
	require.True(t, ok, "the root's proxy pins west: %v", cm.Data)
	framework.Eventually(t, time.Minute, "west advertises its pinned endpoint", func(context.Context) (bool, string) {
		got := kubeletEndpoint(t, "root", "west")
		return got == pin, fmt.Sprintf("west advertises %s, pinned at %s", got, pin)
	})

	cfg, _, err := framework.ChildNodeConfig(ctx, env.Cluster("west"), env.Cluster("root"), targetOf["west"])
	require.NoError(t, err)
	west := kubernetes.NewForConfigOrDie(cfg)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := west.CoreV1().Nodes().Get(ctx, "west", metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port++
		_, err = west.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	require.True(t, apierrors.IsForbidden(err), "west advertising another port: %v", err)
	require.Contains(t, err.Error(), "nestlet-children-kubelet")
	require.Contains(t, err.Error(), "the endpoint its operator pinned, "+pin)
}
