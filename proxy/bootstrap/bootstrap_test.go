package bootstrap

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// newCA returns a self-signed CA certificate (PEM) and its parsed form.
func newCA(t *testing.T, cn string) ([]byte, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: cn}, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), cert
}

func clusterRoleBinding(name, role, group string) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: group}},
	}
}

func TestEnsurePlumbing(t *testing.T) {
	caPEM, _ := newCA(t, "parent-ca")
	const server = "https://parent.example:6443"
	existingInfo := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"},
		Data:       map[string]string{"kubeconfig": "kubeadm's", "jws-kws-abcdef": "signature"},
	}
	csrBinding := clusterRoleBinding("nestlet:bootstrappers-create-csr", "system:node-bootstrapper", "system:bootstrappers")
	approveBinding := clusterRoleBinding("nestlet:bootstrappers-autoapprove", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "system:bootstrappers")
	renewBinding := clusterRoleBinding("nestlet:nodes-autoapprove-renewal", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes")
	deleteBinding := clusterRoleBinding("nestlet:node-self-delete", "nestlet:node-self-delete", "system:nodes")
	slicesBinding := clusterRoleBinding("nestlet:node-endpointslices-read", "nestlet:node-endpointslices-read", "system:nodes")

	tests := []struct {
		name     string
		existing []runtime.Object
		opts     Options
		// wantClusterInfo is the existing cluster-info when it must be kept.
		wantClusterInfo *corev1.ConfigMap
		wantInfoName    string // "" for no nestlet-info
		wantBindings    []rbacv1.ClusterRoleBinding
	}{
		{
			name:         "new parent without auto-approval",
			opts:         Options{ServerURL: server, CAData: caPEM, ClusterName: "root"},
			wantInfoName: "root",
			wantBindings: []rbacv1.ClusterRoleBinding{csrBinding, slicesBinding},
		},
		{
			name:         "new parent with auto-approval",
			opts:         Options{ServerURL: server, CAData: caPEM, ClusterName: "root", AutoApprove: true},
			wantInfoName: "root",
			wantBindings: []rbacv1.ClusterRoleBinding{csrBinding, slicesBinding},
		},
		{
			// kube-controller-manager would approve any name for a
			// bootstrapper, and renewals of revoked nodes: the parent's
			// agent approves instead.
			name:         "an earlier version's approval and self-delete bindings go",
			existing:     []runtime.Object{approveBinding.DeepCopy(), renewBinding.DeepCopy(), deleteBinding.DeepCopy()},
			opts:         Options{ServerURL: server, CAData: caPEM, ClusterName: "root", AutoApprove: true},
			wantInfoName: "root",
			wantBindings: []rbacv1.ClusterRoleBinding{csrBinding, slicesBinding},
		},
		{
			// Children watch nestlet-info: an earlier version's reader
			// role granted get only.
			name: "an earlier version's reader role is brought to the watch",
			existing: []runtime.Object{&rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "nestlet:cluster-info-reader", Namespace: "kube-public"},
				Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cluster-info", "nestlet-info"}}},
			}},
			opts:         Options{ServerURL: server, CAData: caPEM, ClusterName: "root"},
			wantInfoName: "root",
			wantBindings: []rbacv1.ClusterRoleBinding{csrBinding, slicesBinding},
		},
		{
			name:         "no cluster name, no nestlet-info",
			opts:         Options{ServerURL: server, CAData: caPEM},
			wantBindings: []rbacv1.ClusterRoleBinding{csrBinding, slicesBinding},
		},
		{
			name:            "an existing cluster-info is left alone",
			existing:        []runtime.Object{existingInfo.DeepCopy()},
			opts:            Options{ServerURL: server, CAData: caPEM, ClusterName: "root"},
			wantClusterInfo: existingInfo,
			wantInfoName:    "root",
			wantBindings:    []rbacv1.ClusterRoleBinding{csrBinding, slicesBinding},
		},
		{
			name: "an existing nestlet-info gets the new name",
			existing: []runtime.Object{&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "nestlet-info", Namespace: "kube-public"},
				Data:       map[string]string{"clusterName": "old"},
			}},
			opts:         Options{ServerURL: server, CAData: caPEM, ClusterName: "root"},
			wantInfoName: "root",
			wantBindings: []rbacv1.ClusterRoleBinding{csrBinding, slicesBinding},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.existing...)
			require.NoError(t, EnsurePlumbing(t.Context(), client, tt.opts))
			ctx := t.Context()

			info, err := client.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
			require.NoError(t, err)
			if tt.wantClusterInfo != nil {
				if d := cmp.Diff(tt.wantClusterInfo.Data, info.Data); d != "" {
					t.Errorf("existing cluster-info changed (-want +got):\n%s", d)
				}
				for _, a := range client.Actions() {
					var name string
					switch a.GetVerb() {
					case "update":
						name = a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetName()
					case "patch":
						name = a.(k8stesting.PatchAction).GetName()
					case "delete":
						name = a.(k8stesting.DeleteAction).GetName()
					}
					assert.NotEqual(t, "cluster-info", name, "cluster-info changed by %s", a.GetVerb())
				}
			} else {
				cfg, err := clientcmd.Load([]byte(info.Data["kubeconfig"]))
				require.NoError(t, err, "cluster-info kubeconfig does not parse")
				require.Len(t, cfg.Clusters, 1)
				for _, c := range cfg.Clusters {
					assert.Equal(t, server, c.Server)
					assert.Equal(t, caPEM, c.CertificateAuthorityData)
					// The signed copy of nestlet-info, when there is one.
					if tt.wantInfoName == "" {
						assert.Empty(t, c.Extensions)
						continue
					}
					ext, ok := c.Extensions["nestlet.io/info"].(*runtime.Unknown)
					require.True(t, ok, "no nestlet.io/info extension: %v", c.Extensions)
					assert.JSONEq(t, `{"clusterName":"`+tt.wantInfoName+`"}`, string(ext.Raw))
				}
			}

			nestletInfo, err := client.CoreV1().ConfigMaps("kube-public").Get(ctx, "nestlet-info", metav1.GetOptions{})
			if tt.wantInfoName == "" {
				assert.True(t, apierrors.IsNotFound(err), "nestlet-info exists: %v", err)
			} else {
				require.NoError(t, err)
				assert.Equal(t, map[string]string{"clusterName": tt.wantInfoName}, nestletInfo.Data)
			}

			// cluster-info and nestlet-info are readable by anyone, and
			// watchable with a metadata.name field selector.
			role, err := client.RbacV1().Roles("kube-public").Get(ctx, "nestlet:cluster-info-reader", metav1.GetOptions{})
			require.NoError(t, err)
			wantRules := []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cluster-info", "nestlet-info"}}}
			if d := cmp.Diff(wantRules, role.Rules); d != "" {
				t.Errorf("cluster-info reader rules mismatch (-want +got):\n%s", d)
			}
			rb, err := client.RbacV1().RoleBindings("kube-public").Get(ctx, "nestlet:cluster-info-reader", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "nestlet:cluster-info-reader"}, rb.RoleRef)
			wantSubjects := []rbacv1.Subject{
				{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "system:anonymous"},
				{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:authenticated"},
			}
			if d := cmp.Diff(wantSubjects, rb.Subjects); d != "" {
				t.Errorf("cluster-info reader subjects mismatch (-want +got):\n%s", d)
			}

			// Nodes may read EndpointSlices, and nothing more with it.
			cr, err := client.RbacV1().ClusterRoles().Get(ctx, "nestlet:node-endpointslices-read", metav1.GetOptions{})
			require.NoError(t, err)
			wantRead := []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}}}
			if d := cmp.Diff(wantRead, cr.Rules); d != "" {
				t.Errorf("node endpointslices-read rules mismatch (-want +got):\n%s", d)
			}

			// Nodes may not delete their Node (they could register again
			// without the provider taint).
			_, err = client.RbacV1().ClusterRoles().Get(ctx, "nestlet:node-self-delete", metav1.GetOptions{})
			require.Truef(t, apierrors.IsNotFound(err), "no self-delete role: %v", err)

			crbs, err := client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			got := slices.Clone(crbs.Items)
			for i := range got {
				got[i].ManagedFields, got[i].ResourceVersion, got[i].TypeMeta = nil, "", metav1.TypeMeta{}
			}
			slices.SortFunc(got, func(a, b rbacv1.ClusterRoleBinding) int { return strings.Compare(a.Name, b.Name) })
			if d := cmp.Diff(tt.wantBindings, got); d != "" {
				t.Errorf("cluster role bindings mismatch (-want +got):\n%s", d)
			}

			// Running it again changes nothing and does not fail.
			require.NoError(t, EnsurePlumbing(ctx, client, tt.opts), "second run")
		})
	}
}

func TestEnsurePlumbingFails(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cluster-info", errors.New("no"))
	})
	err := EnsurePlumbing(t.Context(), client, Options{ServerURL: "https://parent:6443"})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "cause not wrapped: %v", err)
	assert.ErrorContains(t, err, "kube-public/cluster-info")
}

// secretValue returns key of sec, from Data or, as the API server has not
// converted it, StringData.
func secretValue(sec *corev1.Secret, key string) (string, bool) {
	if v, ok := sec.Data[key]; ok {
		return string(v), true
	}
	v, ok := sec.StringData[key]
	return v, ok
}

func TestCreateToken(t *testing.T) {
	tests := []struct {
		name        string
		ttl         time.Duration
		description string
	}{
		{name: "one hour", ttl: time.Hour, description: "for child a"},
		{name: "one day", ttl: 24 * time.Hour, description: "for child b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			before := time.Now()
			token, err := CreateToken(t.Context(), client, tt.ttl, tt.description, TokenFor{})
			require.NoError(t, err)
			require.Regexp(t, regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`), token)
			id, secret, _ := strings.Cut(token, ".")

			sec, err := client.CoreV1().Secrets("kube-system").Get(t.Context(), "bootstrap-token-"+id, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, corev1.SecretType("bootstrap.kubernetes.io/token"), sec.Type)
			for key, want := range map[string]string{
				"token-id":                       id,
				"token-secret":                   secret,
				"description":                    tt.description,
				"usage-bootstrap-authentication": "true",
				"usage-bootstrap-signing":        "true",
			} {
				got, ok := secretValue(sec, key)
				assert.True(t, ok, "no %s", key)
				assert.Equal(t, want, got, key)
			}
			raw, ok := secretValue(sec, "expiration")
			require.True(t, ok, "no expiration")
			exp, err := time.Parse(time.RFC3339, raw)
			require.NoError(t, err)
			assert.True(t, exp.After(before), "expiration %s not in the future", exp)
			assert.WithinDuration(t, before.Add(tt.ttl), exp, time.Minute)
			_, ok = secretValue(sec, "auth-extra-groups")
			assert.False(t, ok, "extra groups set: bootstrappers are system:bootstrappers")
		})
	}
}

// A token made for one child, auto-approved, carries both in its extra
// groups, which the API server writes into the certificate requests it
// files (join.GrantOf reads them there).
func TestCreateTokenForAChild(t *testing.T) {
	client := fake.NewClientset()
	token, err := CreateToken(t.Context(), client, time.Hour, "", TokenFor{ChildName: "east-1", AutoApprove: true})
	require.NoError(t, err)
	id, _, _ := strings.Cut(token, ".")
	sec, err := client.CoreV1().Secrets("kube-system").Get(t.Context(), "bootstrap-token-"+id, metav1.GetOptions{})
	require.NoError(t, err)
	groups, ok := secretValue(sec, "auth-extra-groups")
	require.True(t, ok)
	assert.Equal(t, "system:bootstrappers:nestlet:child:east-1,system:bootstrappers:nestlet:auto-approve", groups)
	assert.Equal(t, "east-1", sec.Annotations["nestlet.io/child-name"], "kept for people reading the token")

	_, err = CreateToken(t.Context(), client, time.Hour, "", TokenFor{ChildName: "East_1"})
	require.ErrorContains(t, err, `child name "East_1" cannot be carried by a bootstrap token`)
}

func TestCreateTokenDistinct(t *testing.T) {
	client := fake.NewClientset()
	a, err := CreateToken(t.Context(), client, time.Hour, "", TokenFor{})
	require.NoError(t, err)
	b, err := CreateToken(t.Context(), client, time.Hour, "", TokenFor{})
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
}

func TestCAHash(t *testing.T) {
	caPEM, ca := newCA(t, "parent-ca")
	otherPEM, _ := newCA(t, "other-ca")
	sum := sha256.Sum256(ca.RawSubjectPublicKeyInfo)
	want := "sha256:" + hex.EncodeToString(sum[:])
	tests := []struct {
		name    string
		data    []byte
		want    string
		wantErr bool
	}{
		{name: "one CA", data: caPEM, want: want},
		{name: "the first CA of a bundle", data: append(append([]byte{}, caPEM...), otherPEM...), want: want},
		{name: "not PEM", data: []byte("garbage"), wantErr: true},
		{name: "empty", data: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CAHash(tt.data)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Regexp(t, regexp.MustCompile(`^sha256:[0-9a-f]{64}$`), got)
			assert.Equal(t, tt.want, got)
		})
	}
}

// SignInfo copies nestlet-info into the kubeconfig of an existing
// cluster-info, keeps what else it holds, writes nothing when the copy is
// current, and gives up quietly where it may not write.
func TestSignInfo(t *testing.T) {
	caPEM, _ := newCA(t, "parent-ca")
	kubeconfig := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server, c.CertificateAuthorityData = "https://kubeadm.example:6443", caPEM
	kubeconfig.Clusters[""] = c
	raw, err := clientcmd.Write(*kubeconfig)
	require.NoError(t, err)
	existing := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"},
		Data:       map[string]string{"kubeconfig": string(raw), "jws-kws-abcdef": "signature"},
	}
	info := map[string]string{"clusterName": "root", "proxyTunnelURL": "wss://proxy.example/connect"}

	t.Run("copied", func(t *testing.T) {
		client := fake.NewClientset(existing.DeepCopy())
		require.NoError(t, SignInfo(t.Context(), client, "test", info))
		cm, err := client.CoreV1().ConfigMaps("kube-public").Get(t.Context(), "cluster-info", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "signature", cm.Data["jws-kws-abcdef"], "the signer's keys are the signer's")
		cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
		require.NoError(t, err)
		got := cfg.Clusters[""]
		require.NotNil(t, got)
		assert.Equal(t, c.Server, got.Server)
		assert.Equal(t, caPEM, got.CertificateAuthorityData)
		ext, ok := got.Extensions["nestlet.io/info"].(*runtime.Unknown)
		require.True(t, ok)
		assert.JSONEq(t, `{"clusterName":"root","proxyTunnelURL":"wss://proxy.example/connect"}`, string(ext.Raw))

		client.ClearActions()
		require.NoError(t, SignInfo(t.Context(), client, "test", maps.Clone(info)))
		for _, a := range client.Actions() {
			assert.Equal(t, "get", a.GetVerb(), "a current copy is not written again")
		}
	})
	t.Run("not allowed", func(t *testing.T) {
		client := fake.NewClientset(existing.DeepCopy())
		client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "cluster-info", errors.New("no"))
		})
		require.NoError(t, SignInfo(t.Context(), client, "test", info))
		cm, err := client.CoreV1().ConfigMaps("kube-public").Get(t.Context(), "cluster-info", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, existing.Data, cm.Data)
	})
	t.Run("no cluster-info", func(t *testing.T) {
		require.NoError(t, SignInfo(t.Context(), fake.NewClientset(), "test", info))
	})
}
