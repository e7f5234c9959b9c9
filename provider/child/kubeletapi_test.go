package child

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/tunnel"
)

// nestletInfo is the parent's kube-public/nestlet-info publishing a proxy at
// endpoint.
func nestletInfo(endpoint string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: api.ClusterInfoConfigMap, Namespace: metav1.NamespacePublic},
		Data: map[string]string{
			api.ClusterInfoNameKey:              "root",
			api.ClusterInfoProxyTunnelURL:       "wss://" + endpoint,
			api.ClusterInfoProxyKubeletEndpoint: endpoint,
		},
	}
}

func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// The agent follows what the parent publishes about its proxy by a watch,
// reading nothing on a timer or when its tunnel drops; a change of anything but the proxy's keys is
// not a move.
func TestWatchProxyWatches(t *testing.T) {
	client := fake.NewClientset(nestletInfo("10.0.0.1:10250"))
	watching := make(chan struct{}, 4)
	client.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		watching <- struct{}{}
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	k := &kubeletAPI{follow: true, proxy: proxyKeys(nestletInfo("10.0.0.1:10250").Data), tunnelDown: make(chan struct{}, 1)}
	moved := k.watchProxy(t.Context(), clk, client)
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent does not watch nestlet-info")
	}
	// The tunnel drops (its first connections failing while a proxy comes
	// up, say): the watch says whether the proxy moved, no read is made.
	for range 3 {
		select {
		case k.tunnelDown <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatal("the agent does not take the tunnel's drops while it watches")
		}
	}

	renamed := nestletInfo("10.0.0.1:10250")
	renamed.Data[api.ClusterInfoNameKey] = "other"
	_, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Update(t.Context(), renamed, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.False(t, closedWithin(moved, 200*time.Millisecond), "another key changed, not the proxy's")

	_, err = client.CoreV1().ConfigMaps(metav1.NamespacePublic).Update(t.Context(), nestletInfo("10.0.0.2:10250"), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.True(t, closedWithin(moved, 10*time.Second), "the proxy moved and the agent did not notice")
	for _, a := range client.Actions() {
		require.NotEqual(t, "get", a.GetVerb(), "read nestlet-info while watching it: %v", a)
	}
}

// A parent whose reader role does not allow the watch (made by an older
// nestctl token create): the agent reads nestlet-info every
// proxyCheckPeriod instead, and sees the proxy go.
func TestWatchProxyPollsWhereItCannotWatch(t *testing.T) {
	client := fake.NewClientset(nestletInfo("10.0.0.1:10250"))
	client.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", nil)
	})
	clk := clocktesting.NewFakeClock(time.Now())
	k := &kubeletAPI{follow: true, proxy: proxyKeys(nestletInfo("10.0.0.1:10250").Data), tunnelDown: make(chan struct{}, 1)}
	moved := k.watchProxy(t.Context(), clk, client)
	require.Eventually(t, clk.HasWaiters, 10*time.Second, 10*time.Millisecond, "waits for its next read")

	require.NoError(t, client.CoreV1().ConfigMaps(metav1.NamespacePublic).Delete(t.Context(), api.ClusterInfoConfigMap, metav1.DeleteOptions{}))
	clk.Step(proxyCheckPeriod)
	require.True(t, closedWithin(moved, 10*time.Second), "the proxy went and the agent did not notice")
	watches := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "watch" {
			watches++
		}
	}
	require.Equal(t, 1, watches, "a forbidden watch is not tried again")
}

// A change between the join's read and the watch is seen from the watch's
// first event (the API server's watch without a resource version begins
// with the object as it is, which the fake clientset's does not: the
// reactor does it).
func TestWatchProxySeesAChangeBeforeItWatched(t *testing.T) {
	client := fake.NewClientset()
	client.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFakeWithChanSize(1, false)
		w.Add(nestletInfo("10.0.0.2:10250"))
		return true, w, nil
	})
	k := &kubeletAPI{follow: true, proxy: proxyKeys(nestletInfo("10.0.0.1:10250").Data), tunnelDown: make(chan struct{}, 1)}
	require.True(t, closedWithin(k.watchProxy(t.Context(), clocktesting.NewFakeClock(time.Now()), client), 10*time.Second))
}

// In tunnel mode the node's own port is asked for before the node
// registers: once the proxy answered, the node is built with that port and
// no status report follows for it; a port that changes after the node was
// built is reported once the node has registered.
func TestNodeRegistersWithItsOwnPort(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/kubelet-endpoint", r.URL.Path)
		_, _ = w.Write([]byte("10.0.0.1:40001"))
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	k := &kubeletAPI{mode: KubeletAPITunnel, endpoint: "10.0.0.1:10250", tunnelDown: make(chan struct{}, 1), answered: make(chan struct{}),
		tunnel: tunnel.ClientConfig{URL: "wss://" + srv.Listener.Addr().String(), CA: ca, Certificate: tls.Certificate{}}}
	require.False(t, closedWithin(k.nodePortAnswered(), 50*time.Millisecond), "answered before anyone asked")
	k.askEarly(t.Context())
	require.True(t, closedWithin(k.nodePortAnswered(), 10*time.Second), "the early ask got no answer")
	host, port := k.hostPort()
	require.Equal(t, "10.0.0.1", host)
	require.EqualValues(t, 40001, port)

	reports := 0
	registered := &corev1.Node{Status: corev1.NodeStatus{DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 40001}}}}
	k.registered(registered, func() { reports++ })
	require.Zero(t, reports, "the node registered with its port: nothing to report")

	k.mu.Lock()
	k.endpoint = "10.0.0.1:40002" // the proxy answered again meanwhile
	k.mu.Unlock()
	k.registered(registered, func() { reports++ })
	require.Equal(t, 1, reports, "the port changed after the node was built: reported once registered")

	// Refused with its own port (the parent's policy reading a record
	// that lost it, say), the node goes back to the shared port once.
	k.proxy = map[string]string{api.ClusterInfoProxyKubeletEndpoint: "10.0.0.1:10250"}
	require.True(t, k.dropOwnPort(t.Context(), errors.New("refused")))
	require.Equal(t, "10.0.0.1:10250", k.advertisedEndpoint())
	require.False(t, k.dropOwnPort(t.Context(), errors.New("refused")), "already on the shared port")

	// Outside tunnel mode nothing is waited for.
	require.Nil(t, (&kubeletAPI{mode: KubeletAPIDirect}).nodePortAnswered())
}
