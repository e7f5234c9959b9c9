package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/charts/nestlet/policies"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/test/framework"
)

// TestChildrenKubeletPolicy plays the policy nestlet-children-kubelet in a
// real API server: a child's node, written with its own node credential,
// advertises only what its parent's record (kube-public/
// nestlet-proxy-ports) allows it: the proxy (its host, the node's own port
// or the shared one); for a node the proxy's --direct-nodes pins, that
// endpoint too (IPv4 or IPv6); anywhere for a node listed without one or
// with "*". A parent without a proxy pins its children with ".direct"
// alone, and leaves the others free.
func TestChildrenKubeletPolicy(t *testing.T) {
	env := framework.StartForTest(t, launcher.Spec{Clusters: []launcher.ClusterOptions{{Name: "parent"}}})
	c := env.Cluster("parent")
	ctx := t.Context()
	require.NoError(t, policies.InstallChildren(ctx, c.Client, api.DefaultNamespace))

	record := func(data map[string]string) {
		t.Helper()
		cms := c.Client.CoreV1().ConfigMaps(metav1.NamespacePublic)
		cm, err := cms.Get(ctx, policies.ProxyPortsConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: policies.ProxyPortsConfigMap}, Data: data}, metav1.CreateOptions{})
		} else if err == nil {
			cm.Data = data
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		require.NoError(t, err)
	}
	// register writes node name as the node itself (its own credential, as
	// a child's agent does), advertising ip and port; the error, if any.
	clients := map[string]kubernetes.Interface{}
	register := func(name, ip string, port int32) error {
		client := clients[name]
		if client == nil {
			cfg, err := c.NewClientForUser(join.NodeUser(name), "system:nodes")
			require.NoError(t, err)
			client, err = kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			clients[name] = client
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelCluster: name}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
				DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}}}}
		_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err == nil {
			require.NoError(t, c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}))
			require.Eventually(t, func() bool {
				_, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, 30*time.Second, 50*time.Millisecond)
		}
		return err
	}
	allowed := func(name, ip string, port int32) {
		t.Helper()
		require.NoError(t, register(name, ip, port), "%s at %s:%d", name, ip, port)
	}
	refused := func(name, ip string, port int32, why string) {
		t.Helper()
		err := register(name, ip, port)
		require.Error(t, err, "%s at %s:%d", name, ip, port)
		require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
		require.Contains(t, err.Error(), why)
	}
	// once waits until the API server's policy sees the record just
	// written: until a write that only the new record decides goes the
	// way it says.
	once := func(what string, decided func() bool) {
		t.Helper()
		framework.Eventually(t, time.Minute, what, func(context.Context) (bool, string) {
			return decided(), ""
		})
	}

	// A proxy at 10.0.0.1, shared port 10250; "own" has port 10301 there;
	// "pinned" may serve at 10.0.0.5:10250, "pinned6" at [fd00::5]:10250,
	// "free" anywhere.
	record(map[string]string{".host": "10.0.0.1", ".port": "10250", "own": "10301",
		".direct": "pinned=10.0.0.5:10250,free,pinned6=[fd00::5]:10250"})
	once("the policy holds children to the proxy", func() bool { return register("other", "10.9.9.9", 10250) != nil })
	allowed("other", "10.0.0.1", 10250)
	refused("other", "10.9.9.9", 10250, "its nestlet-proxy, 10.0.0.1 port 10250")
	refused("other", "10.0.0.1", 6443, "advertises 10.0.0.1 port 6443")
	allowed("own", "10.0.0.1", 10301)
	allowed("own", "10.0.0.1", 10250)
	refused("own", "10.0.0.1", 10302, "port 10301 or 10250")
	allowed("pinned", "10.0.0.5", 10250)
	allowed("pinned", "10.0.0.1", 10250)
	refused("pinned", "10.0.0.6", 10250, "the endpoint its operator pinned, 10.0.0.5:10250")
	refused("pinned", "10.0.0.5", 10251, "10.0.0.5:10250")
	allowed("pinned6", "fd00::5", 10250)
	refused("pinned6", "fd00::6", 10250, "[fd00::5]:10250")
	allowed("free", "10.7.7.7", 4242)

	// Every child served directly, anywhere.
	record(map[string]string{".host": "10.0.0.1", ".port": "10250", ".direct": "*"})
	once("the policy reads the new record", func() bool { return register("other", "10.9.9.9", 10250) == nil })
	allowed("pinned", "10.0.0.6", 10250)

	// No proxy: the parent's operator pins one child, the others are free.
	record(map[string]string{".direct": "pinned=10.0.0.5:10250"})
	once("the policy reads the record without a proxy", func() bool { return register("pinned", "10.0.0.1", 10250) != nil })
	allowed("pinned", "10.0.0.5", 10250)
	refused("pinned", "10.0.0.6", 10250, "where its parent lets it advertise the endpoint its operator pinned, 10.0.0.5:10250")
	allowed("other", "10.9.9.9", 10250)

	// No record: nothing to hold a child to.
	require.NoError(t, c.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Delete(ctx, policies.ProxyPortsConfigMap, metav1.DeleteOptions{}))
	once("the policy sees no record", func() bool { return register("pinned", "10.0.0.6", 10250) == nil })
}
