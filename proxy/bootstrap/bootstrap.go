// Package bootstrap is the parent's side of a join, what `nestctl token
// create` does: like `kubeadm init phase bootstrap-token`, it makes sure the
// standard bootstrap plumbing exists (an anonymously readable cluster-info,
// RBAC that lets bootstrappers create node CSRs and, when the parent
// chooses, gets them approved automatically) and issues bootstrap tokens.
// Nothing Nestlet-specific runs in the parent for this.
package bootstrap

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	watchtools "k8s.io/client-go/tools/watch"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/retry"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pubkeypin"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// Names of what EnsurePlumbing creates.
const (
	ClusterInfoReaderRole = "nestlet:cluster-info-reader"
	BootstrapperCSRs      = "nestlet:bootstrappers-create-csr"
	BootstrapperApprove   = "nestlet:bootstrappers-autoapprove"
	NodeRenewalApprove    = "nestlet:nodes-autoapprove-renewal"
	NodeSelfDelete        = "nestlet:node-self-delete"
	// NodeEndpointSlicesRead lets nodes read EndpointSlices: a child's
	// agent publishes below it the endpoints of the parent's Services that
	// lie outside its subtree (with gateways: one pod network).
	NodeEndpointSlicesRead = "nestlet:node-endpointslices-read"
	fieldManager           = "nestctl"
)

// Options of EnsurePlumbing.
type Options struct {
	// ServerURL is the parent's API server as children reach it.
	ServerURL string
	// CAData is the parent's CA (PEM).
	CAData []byte
	// ClusterName is the parent's own name, published for children (used
	// on the hop path of forwarded pods); may be empty.
	ClusterName string
	// AutoApprove is kept for callers; approval is the parent's agent's
	// (joins per token, see TokenFor; renewals unless revoked).
	AutoApprove bool
}

// EnsurePlumbing creates what a parent needs for children to join, leaving
// alone what exists (a kubeadm cluster has most of it).
func EnsurePlumbing(ctx context.Context, client kubernetes.Interface, o Options) error {
	if err := ensureClusterInfo(ctx, client, o); err != nil {
		return err
	}
	if err := ensureClusterRoleBinding(ctx, client, BootstrapperCSRs, "system:node-bootstrapper",
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: bootstrapapi.BootstrapDefaultGroup}); err != nil {
		return err
	}
	// kube-controller-manager's approval of bootstrappers' requests would
	// give any token holder any node name: the parent's agent approves
	// them instead, for the name each token was made for
	// (provider/parent/approver.go). A binding left by an earlier version
	// goes.
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, BootstrapperApprove, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing clusterrolebinding %s: %w", BootstrapperApprove, err)
	}
	// Renewals too: the parent's agent approves them unless the node was
	// revoked, which kube-controller-manager would not know.
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, NodeRenewalApprove, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing clusterrolebinding %s: %w", NodeRenewalApprove, err)
	}
	// A node may not delete itself: it could register again without the
	// provider taint. A child that leaves marks its node and the parent's
	// agent deletes it (api.AnnotationLeaving). The grant of an earlier
	// version goes.
	if err := client.RbacV1().ClusterRoleBindings().Delete(ctx, NodeSelfDelete, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing clusterrolebinding %s: %w", NodeSelfDelete, err)
	}
	if err := client.RbacV1().ClusterRoles().Delete(ctx, NodeSelfDelete, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing clusterrole %s: %w", NodeSelfDelete, err)
	}
	if err := ensureClusterRole(ctx, client, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: NodeEndpointSlicesRead},
		Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}}},
	}); err != nil {
		return err
	}
	return ensureClusterRoleBinding(ctx, client, NodeEndpointSlicesRead, NodeEndpointSlicesRead, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"})
}

func ensureClusterInfo(ctx context.Context, client kubernetes.Interface, o Options) error {
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters[""] = &clientcmdapi.Cluster{Server: o.ServerURL, CertificateAuthorityData: o.CAData}
	data, err := clientcmd.Write(*kubeconfig)
	if err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	_, err = cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic},
		Data:       map[string]string{bootstrapapi.KubeConfigKey: string(data)},
	}, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating kube-public/cluster-info: %w", err)
	}
	if o.ClusterName != "" {
		if err := SetClusterInfo(ctx, client, fieldManager, map[string]string{api.ClusterInfoNameKey: o.ClusterName}); err != nil {
			return err
		}
	}
	// Read by anyone; watched (with a metadata.name field selector, which
	// is how RBAC lets a list or watch be limited to names) by the
	// children's agents, which follow the proxy's endpoints in it.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterInfoReaderRole, Namespace: metav1.NamespacePublic},
		Rules: []rbacv1.PolicyRule{{
			Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{bootstrapapi.ConfigMapClusterInfo, api.ClusterInfoConfigMap},
		}},
	}
	roles := client.RbacV1().Roles(metav1.NamespacePublic)
	_, err = roles.Create(ctx, role, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		// Made by an earlier version (get only): brought to these rules.
		cur, gerr := roles.Get(ctx, role.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("reading role %s: %w", role.Name, gerr)
		}
		err = nil
		if !equality.Semantic.DeepEqual(cur.Rules, role.Rules) {
			cur.Rules = role.Rules
			_, err = roles.Update(ctx, cur, metav1.UpdateOptions{FieldManager: fieldManager})
		}
	}
	if err != nil {
		return fmt.Errorf("creating role %s: %w", role.Name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterInfoReaderRole, Namespace: metav1.NamespacePublic},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ClusterInfoReaderRole},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:anonymous"},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"},
		},
	}
	if _, err := client.RbacV1().RoleBindings(metav1.NamespacePublic).Create(ctx, binding, metav1.CreateOptions{FieldManager: fieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating role binding %s: %w", binding.Name, err)
	}
	return nil
}

func ensureClusterRole(ctx context.Context, client kubernetes.Interface, role *rbacv1.ClusterRole) error {
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{FieldManager: fieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating cluster role %s: %w", role.Name, err)
	}
	return nil
}

func ensureClusterRoleBinding(ctx context.Context, client kubernetes.Interface, name, role string, subject rbacv1.Subject) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{FieldManager: fieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating cluster role binding %s: %w", name, err)
	}
	return nil
}

// CreateToken creates a bootstrap token valid for ttl that authenticates as
// system:bootstrappers and signs cluster-info, and returns it (<id>.<secret>).
func CreateToken(ctx context.Context, client kubernetes.Interface, ttl time.Duration, description string, t TokenFor) (string, error) {
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", err
	}
	id, secret, _ := strings.Cut(token, ".")
	annotations := map[string]string{}
	var groups []string
	if t.ChildName != "" {
		annotations[api.AnnotationTokenChildName] = t.ChildName
		groups = append(groups, api.GroupTokenChildPrefix+t.ChildName)
	}
	if t.AutoApprove {
		annotations[api.AnnotationTokenAutoApprove] = "true"
		groups = append(groups, api.GroupTokenAutoApprove)
	}
	data := map[string]string{
		bootstrapapi.BootstrapTokenIDKey:               id,
		bootstrapapi.BootstrapTokenSecretKey:           secret,
		bootstrapapi.BootstrapTokenDescriptionKey:      description,
		bootstrapapi.BootstrapTokenExpirationKey:       time.Now().Add(ttl).UTC().Format(time.RFC3339),
		bootstrapapi.BootstrapTokenUsageAuthentication: "true",
		bootstrapapi.BootstrapTokenUsageSigningKey:     "true",
	}
	if len(groups) > 0 {
		for _, g := range groups {
			if err := bootstraputil.ValidateBootstrapGroupName(g); err != nil {
				return "", fmt.Errorf("child name %q cannot be carried by a bootstrap token: %w", t.ChildName, err)
			}
		}
		data[bootstrapapi.BootstrapTokenExtraGroupsKey] = strings.Join(groups, ",")
	}
	_, err = client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(id), Namespace: metav1.NamespaceSystem, Annotations: annotations},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: data,
	}, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return "", fmt.Errorf("creating bootstrap token secret: %w", err)
	}
	return token, nil
}

// TokenFor says whom a token admits.
type TokenFor struct {
	// ChildName is the one node name the token joins as; any name no live
	// node holds when empty (a token shared by a fleet).
	ChildName string
	// AutoApprove lets the parent's agent approve the join; else it waits
	// for `nestctl approve`.
	AutoApprove bool
}

// WaitSigned waits until the parent's bootstrapsigner controller has signed
// cluster-info for the token, so that a join can start at once.
func WaitSigned(ctx context.Context, client kubernetes.Interface, token string) error {
	id, _, _ := strings.Cut(token, ".")
	cms := client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	lw := kubeclient.SingleObject(bootstrapapi.ConfigMapClusterInfo, cms.List, cms.Watch)
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.ConfigMap{}, nil, func(ev watch.Event) (bool, error) {
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			return false, nil
		}
		_, signed := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+id]
		return signed, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for cluster-info to be signed for token %s (is the bootstrapsigner controller running in kube-controller-manager?): %w", id, err)
	}
	return nil
}

// CAHash returns the kubeadm-style pin (sha256:<hex>) of the first CA in caData.
func CAHash(caData []byte) (string, error) {
	certs, err := certutil.ParseCertsPEM(caData)
	if err != nil {
		return "", fmt.Errorf("parsing CA: %w", err)
	}
	if len(certs) == 0 {
		return "", errors.New("no CA certificate")
	}
	return pubkeypin.Hash(certs[0]), nil
}

// Certificates parses PEM certificates.
func Certificates(pemData []byte) ([]*x509.Certificate, error) {
	return certutil.ParseCertsPEM(pemData)
}

// SetClusterInfo sets keys of kube-public/nestlet-info, creating it if
// needed and keeping the keys others wrote (the cluster name comes from
// nestctl, the proxy's endpoints from nestlet-proxy), then copies the whole
// of it into cluster-info (SignInfo), where a joining child finds it with
// the read that pins the CA.
func SetClusterInfo(ctx context.Context, client kubernetes.Interface, manager string, data map[string]string) error {
	cms := client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	var all map[string]string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cms.Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: api.ClusterInfoConfigMap, Namespace: metav1.NamespacePublic},
				Data:       data,
			}, metav1.CreateOptions{FieldManager: manager})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), api.ClusterInfoConfigMap, err)
			}
			if err != nil {
				return fmt.Errorf("creating kube-public/%s: %w", api.ClusterInfoConfigMap, err)
			}
			all = data
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading kube-public/%s: %w", api.ClusterInfoConfigMap, err)
		}
		next := cur.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		all = next.Data
		changed := false
		for k, v := range data {
			if next.Data[k] != v {
				next.Data[k], changed = v, true
			}
		}
		if !changed {
			return nil
		}
		_, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: manager})
		return err
	})
	if err != nil {
		return err
	}
	return SignInfo(ctx, client, manager, all)
}

// SignInfo copies info (what kube-public/nestlet-info holds) into the
// kubeconfig of kube-public/cluster-info, as the extension
// api.ClusterInfoExtension of its cluster. The parent's bootstrapsigner
// signs that kubeconfig with every bootstrap token, so a joining child that
// reads cluster-info to pin the parent's CA gets the parent's name and
// proxy with it, covered by the same signature, and does not read
// nestlet-info too: one request less per join.
//
// It is best effort: without cluster-info, or without the right to update
// it, children read nestlet-info as before (one request more), and the
// reason is logged. A writer of cluster-info can change what joining
// children are told, but not whom they trust: they pin the CA.
func SignInfo(ctx context.Context, client kubernetes.Interface, manager string, info map[string]string) error {
	logger := klog.FromContext(ctx)
	raw, err := json.Marshal(info) // sorted keys: the same info, the same bytes
	if err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps(metav1.NamespacePublic)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cfg, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
		if err != nil {
			return fmt.Errorf("reading its kubeconfig: %w", err)
		}
		if len(cfg.Clusters) != 1 {
			return fmt.Errorf("its kubeconfig names %d clusters, not one", len(cfg.Clusters))
		}
		for _, c := range cfg.Clusters {
			if ext, ok := c.Extensions[api.ClusterInfoExtension].(*runtime.Unknown); ok && bytes.Equal(ext.Raw, raw) {
				return nil
			}
			if c.Extensions == nil {
				c.Extensions = map[string]runtime.Object{}
			}
			c.Extensions[api.ClusterInfoExtension] = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
		}
		kubeconfig, err := clientcmd.Write(*cfg)
		if err != nil {
			return err
		}
		next := cm.DeepCopy()
		next.Data[bootstrapapi.KubeConfigKey] = string(kubeconfig)
		_, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: manager})
		return err
	})
	if err != nil {
		logger.Info("Not copying nestlet-info into cluster-info: joining children will read nestlet-info separately, one request more per join",
			"reason", err.Error())
	}
	return nil
}
