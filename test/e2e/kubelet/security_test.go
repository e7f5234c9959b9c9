package kubelet

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// kubeletEndpoint is what cluster's virtual node advertises in parent.
func kubeletEndpoint(t *testing.T, parent, node string) string {
	t.Helper()
	n, err := env.Cluster(parent).Client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, n.Status.Addresses, "node %s advertises no address", node)
	return fmt.Sprintf("%s:%d", n.Status.Addresses[0].Address, n.Status.DaemonEndpoints.KubeletEndpoint.Port)
}

// get calls a kubelet API path with cfg's client certificate (none when
// nil) and returns the status code.
func get(t *testing.T, endpoint, path string, cfg *rest.Config) int {
	t.Helper()
	tc := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // only the status code matters
	if cfg != nil {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if cfg.CertData != nil {
			cert, err = tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		}
		require.NoError(t, err)
		tc.Certificates = []tls.Certificate{cert}
	}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	resp, err := client.Get("https://" + endpoint + path)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestUnauthenticatedAndUnauthorisedCallersAreRefused(t *testing.T) {
	ns, _, _ := runPod(t, "east")
	westNS, _, _ := runPod(t, "west")
	mallory, err := env.Cluster("root").NewClientForUser("mallory")
	require.NoError(t, err)

	proxy := kubeletEndpoint(t, "root", "east")
	direct := kubeletEndpoint(t, "root", "west")
	require.NotEqual(t, proxy, direct)
	for _, tt := range []struct {
		name, endpoint, path string
		cfg                  *rest.Config
		want                 int
	}{
		{"proxy, anonymous", proxy, "/containerLogs/" + ns + "/app/app", nil, http.StatusUnauthorized},
		{"proxy, anonymous, node-level path", proxy, "/stats/summary", nil, http.StatusUnauthorized},
		{"proxy, user without nodes/proxy", proxy, "/containerLogs/" + ns + "/app/app", mallory, http.StatusForbidden},
		{"direct agent, anonymous", direct, "/containerLogs/" + westNS + "/app/app", nil, http.StatusUnauthorized},
		{"direct agent, user without nodes/proxy", direct, "/containerLogs/" + westNS + "/app/app", mallory, http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, get(t, tt.endpoint, tt.path, tt.cfg))
		})
	}
}

// A tunnel is admitted only with a node certificate, and keyed by the node
// name in it: a user certificate, or none, is refused.
func TestTunnelNeedsANodeCertificate(t *testing.T) {
	cm, err := env.Cluster("root").Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(t.Context(), api.ClusterInfoConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	url := cm.Data[api.ClusterInfoProxyTunnelURL]
	require.NotEmpty(t, url)
	user, err := env.Cluster("root").NewClientForUser("west-impostor", "system:authenticated")
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		cfg  *rest.Config
	}{{"no certificate", nil}, {"user certificate", user}} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the server is not under test
			if tt.cfg != nil {
				cert, err := tls.LoadX509KeyPair(tt.cfg.CertFile, tt.cfg.KeyFile)
				require.NoError(t, err)
				tc.Certificates = []tls.Certificate{cert}
			}
			d := websocket.Dialer{TLSClientConfig: tc, HandshakeTimeout: 10 * time.Second}
			ws, resp, err := d.DialContext(t.Context(), url, http.Header{"X-API-Tunnel-ID": {"west"}})
			if ws != nil {
				_ = ws.Close()
			}
			require.Error(t, err)
			require.NotNil(t, resp)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		})
	}
}

// In tunnel mode an agent listens on nothing; the direct-mode agent does.
func TestTunnelAgentsListenOnNothing(t *testing.T) {
	agents := map[string]*launcher.Process{}
	for _, p := range env.Processes() {
		if name, ok := strings.CutSuffix(p.Name, "-nestlet"); ok {
			agents[name] = p
		}
	}
	for _, name := range []string{"east", "east-1"} {
		p := agents[name]
		require.NotNil(t, p, "agent of %s", name)
		ports, err := framework.ListeningTCPPorts(p)
		require.NoError(t, err)
		require.Empty(t, ports, "agent of %s listens on %v", name, ports)
	}
	ports, err := framework.ListeningTCPPorts(agents["west"])
	require.NoError(t, err)
	direct := kubeletEndpoint(t, "root", "west")
	require.True(t, slices.ContainsFunc(ports, func(p int) bool { return strings.HasSuffix(direct, fmt.Sprintf(":%d", p)) }),
		"west's agent listens on %v, advertises %s", ports, direct)

	// The Targets say how the kubelet API is served.
	for child, want := range map[string]string{"east": "reverse tunnel", "west": "served directly"} {
		require.NoError(t, env.Cluster(child).WaitTarget(t.Context(), targetOf[child], 30*time.Second, func(tg *v1alpha1.Target) bool {
			return strings.Contains(launcher.TargetCondition(tg, v1alpha1.ConditionReady).Message, want)
		}), "Target of %s", child)
	}
}
