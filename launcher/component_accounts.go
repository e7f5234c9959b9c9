package launcher

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// identityTokenSeconds is how long an identity's token lasts in an
// Environment that ends with its program: longer than any test.
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
	if err := applyFlowSchemas(ctx, c, "nestlet-launcher-"+component, subject); err != nil {
		return "", fmt.Errorf("cluster %s: %s's FlowSchemas: %w", c.Name, component, err)
	}
	token, err := e.identityToken(ctx, c, namespace, sa)
	if err != nil {
		return "", fmt.Errorf("cluster %s: %s's token: %w", c.Name, component, err)
	}
	cfg, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		return "", err
	}
	for name := range cfg.AuthInfos {
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
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

// applyFlowSchemas serves the requests of the ServiceAccount subject at the
// priority levels the chart's FlowSchemas give its components
// (charts/nestlet/templates/flowschemas.yaml): leader election at
// leader-election, everything else at workload-high.
func applyFlowSchemas(ctx context.Context, c *Cluster, name string, subject rbacv1.Subject) error {
	who := []flowcontrolv1.Subject{{
		Kind:           flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: subject.Name, Namespace: subject.Namespace},
	}}
	byUser := &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType}
	schemas := []flowcontrolv1.FlowSchema{{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-leader-election"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "leader-election"},
			MatchingPrecedence:         150,
			DistinguisherMethod:        byUser,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{Subjects: who, ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
				Verbs: []string{"get", "create", "update"}, APIGroups: []string{"coordination.k8s.io"},
				Resources: []string{"leases"}, Namespaces: []string{subject.Namespace},
			}}}},
		},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-high"},
			MatchingPrecedence:         1000,
			DistinguisherMethod:        byUser,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: who,
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					Namespaces: []string{"*"}, ClusterScope: true,
				}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}}
	fs := c.Client.FlowcontrolV1().FlowSchemas()
	var errs []error
	for _, o := range schemas {
		errs = append(errs, createOrUpdate(ctx, &o, fs.Create, fs.Update))
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

// identityToken returns a token of the ServiceAccount sa: from the
// TokenRequest API (identityTokenSeconds), or, in a detached Environment,
// which runs until someone stops it, the token the controller manager
// writes into a Secret of type service-account-token (it does not
// expire; deleting the Secret revokes it).
func (e *Environment) identityToken(ctx context.Context, c *Cluster, namespace, sa string) (string, error) {
	if e.state == nil {
		tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(identityTokenSeconds))},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return tr.Status.Token, nil
	}
	secrets := c.Client.CoreV1().Secrets(namespace)
	_, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: sa + "-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	var token string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := secrets.Get(ctx, sa+"-token", metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("the controller manager wrote no token into %s/%s-token: %w", namespace, sa, err)
	}
	return token, nil
}

// printedIdentities returns given, with the rules the agent's and the
// proxy's programs print (--print-permissions) for the components it has
// no entry for.
func printedIdentities(own *NestletBinaries, given map[string][]permissions.Rule) (map[string][]permissions.Rule, error) {
	out := maps.Clone(given)
	if out == nil {
		out = map[string][]permissions.Rule{}
	}
	for component, bin := range map[string]string{ComponentAgent: own.Nestlet, ComponentProxy: own.Proxy} {
		if _, ok := out[component]; ok {
			continue
		}
		raw, err := exec.Command(bin, "--print-permissions").Output()
		if err != nil {
			return nil, fmt.Errorf("%s --print-permissions (a build older than the flag? run make build): %w", bin, err)
		}
		if out[component], err = permissions.Read(raw); err != nil {
			return nil, fmt.Errorf("%s --print-permissions: %w", bin, err)
		}
	}
	return out, nil
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
