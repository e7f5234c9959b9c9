package kubelet

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/nestlet/nestlet/api"
)

// The root's nestlet-info (its name from nestctl, its proxy's endpoints
// from nestlet-proxy) is copied into cluster-info's kubeconfig, and the
// root's own bootstrapsigner has signed that kubeconfig again for every
// token: a joining child gets both with the one read that pins the CA.
func TestClusterInfoCarriesSignedNestletInfo(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root").Client
	info, err := root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, info.Data[api.ClusterInfoProxyTunnelURL], "the proxy published nothing")

	var cm *corev1.ConfigMap
	var signed map[string]string
	// The proxy copies after it publishes: give it a moment.
	require.Eventually(t, func() bool {
		cm, err = root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			return false
		}
		cfg, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
		if err != nil || len(cfg.Clusters) != 1 {
			return false
		}
		for _, c := range cfg.Clusters {
			ext, ok := c.Extensions[api.ClusterInfoExtension].(*runtime.Unknown)
			if !ok {
				return false
			}
			signed = nil
			if json.Unmarshal(ext.Raw, &signed) != nil {
				return false
			}
		}
		return assert.ObjectsAreEqual(info.Data, signed)
	}, 30*time.Second, 200*time.Millisecond, "cluster-info does not carry nestlet-info: %v", signed)

	tokens, err := root.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeBootstrapToken)})
	require.NoError(t, err)
	require.NotEmpty(t, tokens.Items)
	require.Eventually(t, func() bool {
		cm, err = root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, s := range tokens.Items {
			id, secret := string(s.Data[bootstrapapi.BootstrapTokenIDKey]), string(s.Data[bootstrapapi.BootstrapTokenSecretKey])
			sig := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+id]
			if !jws.DetachedTokenIsValid(sig, cm.Data[bootstrapapi.KubeConfigKey], id, secret) {
				t.Logf("token %s: signature not (yet) valid for the current kubeconfig", id)
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "the bootstrapsigner did not sign the kubeconfig with the copy")
}
