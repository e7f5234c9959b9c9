package join

import (
	"encoding/json"
	"encoding/pem"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pubkeypin"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
)

// fakeParent serves kube-public's cluster-info and nestlet-info over TLS,
// as a parent's API server would, and counts the reads of each.
type fakeParent struct {
	srv *httptest.Server
	ca  []byte // the server's certificate (PEM), named in cluster-info

	mu sync.Mutex
	// clusterInfo returns cluster-info for the n-th read (from 0).
	clusterInfo func(n int) *corev1.ConfigMap
	nestletInfo map[string]string
	reads       map[string]int
}

func newFakeParent(t *testing.T) *fakeParent {
	f := &fakeParent{reads: map[string]int{}}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		f.mu.Lock()
		n := f.reads[name]
		f.reads[name]++
		var cm *corev1.ConfigMap
		switch {
		case r.URL.Path == "/api/v1/namespaces/kube-public/configmaps/"+bootstrapapi.ConfigMapClusterInfo:
			cm = f.clusterInfo(n)
		case r.URL.Path == "/api/v1/namespaces/kube-public/configmaps/"+api.ClusterInfoConfigMap && f.nestletInfo != nil:
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.ClusterInfoConfigMap, Namespace: "kube-public"}, Data: f.nestletInfo}
		}
		f.mu.Unlock()
		if cm == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cm)
	}))
	t.Cleanup(f.srv.Close)
	f.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	return f
}

// kubeconfig returns cluster-info's kubeconfig naming the server and its CA,
// with info as the signed copy of nestlet-info when not nil.
func (f *fakeParent) kubeconfig(t *testing.T, info map[string]string) string {
	cfg := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server, c.CertificateAuthorityData = f.srv.URL, f.ca
	if info != nil {
		raw, err := json.Marshal(info)
		require.NoError(t, err)
		c.Extensions[api.ClusterInfoExtension] = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	}
	cfg.Clusters[""] = c
	out, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return string(out)
}

// signed returns cluster-info holding kubeconfig, signed for the token over
// signedContent (the kubeconfig itself, or an older one).
func signed(t *testing.T, kubeconfig, signedContent, token string) *corev1.ConfigMap {
	id, secret, _ := strings.Cut(token, ".")
	sig, err := jws.ComputeDetachedSignature(signedContent, id, secret)
	require.NoError(t, err)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: "kube-public"},
		Data:       map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, bootstrapapi.JWSSignatureKeyPrefix + id: sig},
	}
}

// readCounts returns how many times each ConfigMap was read.
func (f *fakeParent) readCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.reads)
}

func (f *fakeParent) pin(t *testing.T) string {
	return pubkeypin.Hash(f.srv.Certificate())
}

const testToken = "abcdef.0123456789abcdef"

// A parent whose cluster-info carries the signed copy of nestlet-info is
// discovered with that one read.
func TestDiscoverTakesTheSignedInfo(t *testing.T) {
	f := newFakeParent(t)
	info := map[string]string{api.ClusterInfoNameKey: "root", api.ClusterInfoProxyTunnelURL: "wss://proxy.example/connect"}
	kc := f.kubeconfig(t, info)
	f.clusterInfo = func(int) *corev1.ConfigMap { return signed(t, kc, kc, testToken) }
	f.nestletInfo = map[string]string{api.ClusterInfoNameKey: "not this one"}

	p, err := Discover(t.Context(), DiscoveryOptions{ParentURL: f.srv.URL, Token: testToken, CACertHash: f.pin(t)})
	require.NoError(t, err)
	assert.Equal(t, "root", p.ClusterName)
	assert.Equal(t, info, p.Info)
	assert.Equal(t, f.ca, p.CAData)
	assert.Equal(t, map[string]int{bootstrapapi.ConfigMapClusterInfo: 1}, f.readCounts(), "one read in all")
}

// A parent without the copy (not upgraded, or its proxy may not write
// cluster-info) is discovered as before, with a read of nestlet-info over
// the pinned CA.
func TestDiscoverReadsNestletInfoWithoutTheSignedCopy(t *testing.T) {
	f := newFakeParent(t)
	kc := f.kubeconfig(t, nil)
	f.clusterInfo = func(int) *corev1.ConfigMap { return signed(t, kc, kc, testToken) }
	f.nestletInfo = map[string]string{api.ClusterInfoNameKey: "root"}

	p, err := Discover(t.Context(), DiscoveryOptions{ParentURL: f.srv.URL, Token: testToken, CACertHash: f.pin(t)})
	require.NoError(t, err)
	assert.Equal(t, "root", p.ClusterName)
	assert.Equal(t, map[string]int{bootstrapapi.ConfigMapClusterInfo: 1, api.ClusterInfoConfigMap: 1}, f.readCounts())
}

// Right after the copy changed, cluster-info holds the new kubeconfig with
// the signature of the old one until the parent's bootstrapsigner signs it
// again: discovery looks again rather than calling the secret wrong.
func TestDiscoverWaitsForTheSignatureOfAChangedClusterInfo(t *testing.T) {
	f := newFakeParent(t)
	old := f.kubeconfig(t, map[string]string{api.ClusterInfoNameKey: "root"})
	kc := f.kubeconfig(t, map[string]string{api.ClusterInfoNameKey: "root", api.ClusterInfoProxyTunnelURL: "wss://proxy.example/connect"})
	f.clusterInfo = func(n int) *corev1.ConfigMap {
		if n < 2 {
			return signed(t, kc, old, testToken)
		}
		return signed(t, kc, kc, testToken)
	}

	p, err := Discover(t.Context(), DiscoveryOptions{ParentURL: f.srv.URL, Token: testToken, CACertHash: f.pin(t)})
	require.NoError(t, err)
	assert.Equal(t, "wss://proxy.example/connect", p.Info[api.ClusterInfoProxyTunnelURL])
	assert.Equal(t, 3, f.readCounts()[bootstrapapi.ConfigMapClusterInfo])
}

// A wrong secret is still called wrong, after the few looks.
func TestDiscoverRejectsAWrongSecret(t *testing.T) {
	f := newFakeParent(t)
	kc := f.kubeconfig(t, map[string]string{api.ClusterInfoNameKey: "root"})
	f.clusterInfo = func(int) *corev1.ConfigMap { return signed(t, kc, kc, "abcdef.ffffffffffffffff") }

	_, err := Discover(t.Context(), DiscoveryOptions{ParentURL: f.srv.URL, Token: testToken, CACertHash: f.pin(t)})
	require.Error(t, err)
	reason, msg := ReasonOf(err, "")
	assert.Equal(t, v1alpha1.ReasonTokenRejected, reason)
	assert.Contains(t, msg, "does not match")
	assert.Equal(t, resignAttempts+1, f.readCounts()[bootstrapapi.ConfigMapClusterInfo])
}

// A pin of another CA is refused, whatever the signed copy says.
func TestDiscoverChecksThePinBeforeTheSignedInfo(t *testing.T) {
	f := newFakeParent(t)
	kc := f.kubeconfig(t, map[string]string{api.ClusterInfoNameKey: "root"})
	f.clusterInfo = func(int) *corev1.ConfigMap { return signed(t, kc, kc, testToken) }

	_, err := Discover(t.Context(), DiscoveryOptions{ParentURL: f.srv.URL, Token: testToken,
		CACertHash: "sha256:" + strings.Repeat("0", 64)})
	require.Error(t, err)
	reason, _ := ReasonOf(err, "")
	assert.Equal(t, v1alpha1.ReasonCAMismatch, reason)
}
