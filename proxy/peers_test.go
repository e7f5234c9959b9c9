package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/pkg/tunnel"
)

// Two replicas of one proxy, peers: a child's tunnel held by the first is
// reached through the second, and a second tunnel of the same name on the
// second replica is refused while the first holds one.
func TestPeersServeEachOthersTunnels(t *testing.T) {
	clientCA := newTestCA(t, "parent-client-ca")
	servingCA := newTestCA(t, "proxy-ca")
	serving := servingCA.issue(t, "proxy", nil, x509.ExtKeyUsageServerAuth, "127.0.0.1", "127.0.0.2")
	// The replicas, at 127.0.0.1 and 127.0.0.2 on one port, as pods of a
	// Deployment are at their own IPs on the same container port.
	client := fake.NewClientset(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "proxy-peers-abc", Namespace: "nestlet-system",
			Labels: map[string]string{discoveryv1.LabelServiceName: "proxy-peers"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"127.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
	})
	replica := func(ip string, port int) *Proxy {
		p, err := New(Config{Client: client, ClientCA: clientCA.pem, ServingCert: serving, ServingCA: servingCA.pem,
			BindAddress: ip, TunnelPort: port, AdvertiseAddress: ip,
			Peers: &PeerConfig{ID: ip, Token: "shared-secret", Namespace: "nestlet-system", Service: "proxy-peers"}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return p
	}
	a := replica("127.0.0.1", 0)
	b := replica("127.0.0.2", a.tunnelLn.Addr().(*net.TCPAddr).Port)

	// The child reaches a.
	east := clientCA.issue(t, "system:node:east", []string{"system:nodes"}, x509.ExtKeyUsageClientAuth)
	ctx, stopChild := context.WithCancel(t.Context())
	childDone := make(chan struct{})
	go func() {
		defer close(childDone)
		_ = tunnel.Run(ctx, tunnel.ClientConfig{URL: a.TunnelURL(), CA: servingCA.pem, Certificate: east,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "east here") })})
	}()
	defer func() { stopChild(); <-childDone }()
	require.Eventually(t, func() bool { return a.guard.holds("east") }, 10*time.Second, 10*time.Millisecond, "a holds east's tunnel")
	require.Eventually(t, func() bool { return b.tunnels.HasSession("east") }, 30*time.Second, 50*time.Millisecond, "b learns of east's tunnel from its peer")
	require.False(t, b.guard.holds("east"))
	require.Eventually(t, func() bool { return b.ready.Load() && a.ready.Load() }, 30*time.Second, 50*time.Millisecond, "both ready")
	require.True(t, b.peers.allIn(), "b became ready with its peer connected, not by the warm-up's end")

	// A request on b goes through a to the child.
	httpc := &http.Client{Transport: &http.Transport{DialContext: b.tunnels.Dialer("east"), DisableKeepAlives: true}}
	resp, err := httpc.Get("http://" + tunnel.Address + "/containerLogs/ns/pod/app")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, "east here", string(body))

	// Another certificate of the name east on b: refused, as it would be
	// on a.
	impostor := clientCA.issue(t, "system:node:east", []string{"system:nodes"}, x509.ExtKeyUsageClientAuth)
	roots := x509.NewCertPool()
	roots.AddCert(servingCA.cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &impostor, nil }}}
	defer tr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: tr}).Get("https://" + net.JoinHostPort("127.0.0.2", strconv.Itoa(b.tunnelLn.Addr().(*net.TCPAddr).Port)) + "/connect")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), "another replica of this proxy")

	// A peer connection without the token is no peer.
	req, err := http.NewRequest(http.MethodGet, "https://127.0.0.2:"+strconv.Itoa(b.tunnelLn.Addr().(*net.TCPAddr).Port)+"/connect", nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Tunnel-ID", "127.0.0.1")
	req.Header.Set("X-API-Tunnel-Token", "guessed")
	plain := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	defer plain.CloseIdleConnections()
	resp, err = (&http.Client{Transport: plain}).Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// peerIDs lists the ready addresses, but this replica's.
func TestPeerIDs(t *testing.T) {
	slices := []*discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{
		{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		{Addresses: []string{"10.0.0.3"}},
		{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
	}}}
	require.Equal(t, map[string]bool{"10.0.0.1": true, "10.0.0.3": true}, peerIDs(slices, "10.0.0.9"))
}

// A replica whose listed peer never connects (gone, say) becomes ready at
// the end of the warm-up, not before, and stays ready.
func TestPeerWarmUpEnds(t *testing.T) {
	defer func(d time.Duration) { peerWarmUp = d }(peerWarmUp)
	peerWarmUp = time.Second
	clientCA, servingCA := newTestCA(t, "client-ca"), newTestCA(t, "proxy-ca")
	client := fake.NewClientset(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "peers-x", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "peers"}},
		Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1", "192.0.2.1"}}},
	})
	p, err := New(Config{Client: client, ClientCA: clientCA.pem, ServingCert: servingCA.issue(t, "proxy", nil, x509.ExtKeyUsageServerAuth, "127.0.0.1"),
		ServingCA: servingCA.pem, BindAddress: "127.0.0.1", AdvertiseAddress: "127.0.0.1",
		Peers: &PeerConfig{ID: "127.0.0.1", Token: "t", Namespace: "ns", Service: "peers"}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	require.Eventually(t, p.ready.Load, 10*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), peerWarmUp, "ready before the warm-up ended, with a peer missing")
	require.False(t, p.peers.allIn())
}
