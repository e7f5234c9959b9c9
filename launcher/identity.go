package launcher

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/permissions"
)

// The components Config.Identities names.
const (
	ComponentAgent = "agent"
	ComponentProxy = "proxy"
)

// identityTokenSeconds is how long an identity's token lasts: longer than
// any test; Environments that outlive their program run as admin.
const identityTokenSeconds = 24 * 3600

// kubeconfigFor is the kubeconfig component runs with in c: the admin's
// without an identity (Config.Identities), else one with the token of the
// ServiceAccount nestlet-<component> of namespace, bound to the
// component's rules as the chart binds them (RBAC named
// nestlet-launcher-<component>, made or updated here).
func (e *Environment) kubeconfigFor(ctx context.Context, c *Cluster, component, namespace string) (string, error) {
	rules, ok := e.Identities[component]
	if !ok {
		return c.KubeconfigPath, nil
	}
	sa := "nestlet-" + component
	if err := c.EnsureNamespace(ctx, namespace); err != nil {
		return "", err
	}
	_, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("cluster %s: %s's ServiceAccount: %w", c.Name, component, err)
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}
	rbac := permissions.ToRBAC(rules, "nestlet-launcher-"+component, namespace, subject,
		map[string]string{"<fullname>-agent": "nestlet-agent"})
	if err := applyRBAC(ctx, c, rbac); err != nil {
		return "", fmt.Errorf("cluster %s: %s's RBAC: %w", c.Name, component, err)
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(identityTokenSeconds))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("cluster %s: %s's token: %w", c.Name, component, err)
	}
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		return "", err
	}
	for name := range cfg.AuthInfos {
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	}
	path := filepath.Join(c.Dir, fmt.Sprintf("%s-%s.kubeconfig", component, namespace))
	return path, clientcmd.WriteToFile(*cfg, path)
}

// applyRBAC creates rbac's objects, or updates those that exist.
func applyRBAC(ctx context.Context, c *Cluster, rbac permissions.RBAC) error {
	r := c.Client.RbacV1()
	var errs []error
	for _, o := range rbac.ClusterRoles {
		errs = append(errs, createOrUpdate(ctx, &o, r.ClusterRoles().Create, r.ClusterRoles().Update))
	}
	for _, o := range rbac.ClusterRoleBindings {
		errs = append(errs, createOrUpdate(ctx, &o, r.ClusterRoleBindings().Create, r.ClusterRoleBindings().Update))
	}
	for _, o := range rbac.Roles {
		errs = append(errs, createOrUpdate(ctx, &o, r.Roles(o.Namespace).Create, r.Roles(o.Namespace).Update))
	}
	for _, o := range rbac.RoleBindings {
		errs = append(errs, createOrUpdate(ctx, &o, r.RoleBindings(o.Namespace).Create, r.RoleBindings(o.Namespace).Update))
	}
	return errors.Join(errs...)
}

// createOrUpdate creates obj, or updates it where it exists.
func createOrUpdate[T any](ctx context.Context, obj *T,
	create func(context.Context, *T, metav1.CreateOptions) (*T, error),
	update func(context.Context, *T, metav1.UpdateOptions) (*T, error),
) error {
	_, err := create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = update(ctx, obj, metav1.UpdateOptions{})
	}
	return err
}

// agentNamespace is the --namespace of an agent's arguments, or its
// default.
func agentNamespace(args []string) string {
	ns := api.DefaultNamespace
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--namespace="); ok {
			ns = v
		} else if a == "--namespace" && i+1 < len(args) {
			ns = args[i+1]
		}
	}
	return ns
}
