package kubelet

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/api"

	"github.com/nestlet/nestlet/launcher"
)

// A parent's nestlet-proxy restarted on other ports with a new self-signed
// certificate: the child's agent notices what the parent now publishes,
// dials the new proxy, its virtual node advertises the port the new proxy
// serves it on (the node port recorded in kube-public/nestlet-proxy-ports,
// kept across the restart), and exec from the root works again, with no
// action on the child.
func TestProxyRestartedElsewhere(t *testing.T) {
	ns, _, _ := runPod(t, "east")
	root := env.Cluster("root").Client
	info, err := root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(t.Context(), api.ClusterInfoConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	shared := info.Data[api.ClusterInfoProxyKubeletEndpoint]

	var old *launcher.Process
	for _, p := range env.Processes() {
		if p.Name == "root-nestlet-proxy" && p.Alive() {
			old = p
		}
	}
	require.NotNil(t, old, "root's proxy")
	old.Stop(10 * time.Second)
	_, err = env.StartProxy(t.Context(), env.Cluster("root"))
	require.NoError(t, err)
	info, err = root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(t.Context(), api.ClusterInfoConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, shared, info.Data[api.ClusterInfoProxyKubeletEndpoint], "the new proxy publishes other ports")
	host, _, err := net.SplitHostPort(info.Data[api.ClusterInfoProxyKubeletEndpoint])
	require.NoError(t, err)

	var last string
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		ports, err := root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "nestlet-proxy-ports", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = kubeletEndpoint(t, "root", "east")
		if last != net.JoinHostPort(host, ports.Data["east"]) {
			return false, nil
		}
		out, _, err := kubectl(ctx, "root", "", "exec", "-n", ns, "app", "--", "echo", "again")
		return err == nil && out == "again\n", nil
	})
	require.NoError(t, err, "exec through the restarted proxy (east advertises %s)", last)
}
