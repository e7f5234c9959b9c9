package kubelet

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"

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
	_, err = env.StartProxy(t.Context(), env.Cluster("root"), proxyArgs("root")...)
	require.NoError(t, err)
	info, err = root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(t.Context(), api.ClusterInfoConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, shared, info.Data[api.ClusterInfoProxyKubeletEndpoint], "the new proxy publishes other ports")
	host, _, err := net.SplitHostPort(info.Data[api.ClusterInfoProxyKubeletEndpoint])
	require.NoError(t, err)

	framework.EventuallyEvery(t, time.Second, 3*time.Minute, "exec through the restarted proxy", func(ctx context.Context) (bool, string) {
		ports, err := root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "nestlet-proxy-ports", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		advertised := kubeletEndpoint(t, "root", "east")
		if advertised != net.JoinHostPort(host, ports.Data["east"]) {
			return false, "east advertises " + advertised
		}
		out, errOut, err := kubectl(ctx, "root", "", "exec", "-n", ns, "app", "--", "echo", "again")
		return err == nil && out == "again\n", fmt.Sprintf("east advertises %s; exec: %q %q %v", advertised, out, errOut, err)
	})
}
