package permissions

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestGrants(t *testing.T) {
	rules := []Rule{
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list"}},
		{Namespace: ReleaseNamespace, APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"watch"}},
		{Namespace: "kube-system", APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"a", "b"}, Verbs: []string{"get"}},
		{NonResourceURLs: []string{"/readyz"}, Verbs: []string{"get"}},
		{BoundRole: "system:auth-delegator"},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}, // a duplicate
	}
	require.Equal(t, []string{
		"cluster bound-role system:auth-delegator",
		"cluster core/nodes (any) get",
		"cluster core/nodes (any) list",
		"cluster core/pods (any) get",
		"cluster core/pods (any) list",
		"cluster url /readyz get",
		"kube-system core/configmaps a get",
		"kube-system core/configmaps b get",
		"nestlet-system core/secrets (any) watch",
	}, Grants(rules, "nestlet-system"))
	require.Empty(t, Wildcards(rules))
	require.Len(t, Wildcards([]Rule{{APIGroups: []string{"*"}, Resources: []string{"pods"}, Verbs: []string{"get"}}, {Verbs: []string{"*"}}}), 2)
}

func TestToRBAC(t *testing.T) {
	rules := []Rule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{NonResourceURLs: []string{"/readyz"}, Verbs: []string{"get"}},
		{Namespace: ReleaseNamespace, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"<lease>"}, Verbs: []string{"update"}},
		{Namespace: "kube-system", APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		{BoundRole: "system:auth-delegator"},
		{Namespace: "kube-system", BoundRole: "extension-apiserver-authentication-reader"},
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "sa", Namespace: "ns"}
	got := ToRBAC(rules, "c", "ns", subject, map[string]string{"<lease>": "c-lease"})

	require.Len(t, got.ClusterRoles, 1)
	require.Equal(t, "c", got.ClusterRoles[0].Name)
	require.Len(t, got.ClusterRoles[0].Rules, 2)
	var roles []string
	for _, r := range got.Roles {
		roles = append(roles, r.Namespace+"/"+r.Name)
	}
	require.Equal(t, []string{"ns/c", "kube-system/c"}, roles)
	require.Equal(t, []string{"c-lease"}, got.Roles[0].Rules[0].ResourceNames)

	var crbs, rbs []string
	for _, b := range got.ClusterRoleBindings {
		crbs = append(crbs, b.Name+"->"+b.RoleRef.Kind+"/"+b.RoleRef.Name)
		require.Equal(t, []rbacv1.Subject{subject}, b.Subjects)
	}
	for _, b := range got.RoleBindings {
		rbs = append(rbs, b.Namespace+"/"+b.Name+"->"+b.RoleRef.Kind+"/"+b.RoleRef.Name)
		require.Equal(t, []rbacv1.Subject{subject}, b.Subjects)
	}
	require.ElementsMatch(t, []string{"c:system-auth-delegator->ClusterRole/system:auth-delegator", "c->ClusterRole/c"}, crbs)
	require.ElementsMatch(t, []string{"kube-system/c:extension-apiserver-authentication-reader->Role/extension-apiserver-authentication-reader", "ns/c->Role/c", "kube-system/c->Role/c"}, rbs)
}

// What Write prints, Read reads back whole; nothing is not a list.
func TestWriteRead(t *testing.T) {
	rules := []Rule{
		{Namespace: ReleaseNamespace, APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}, Why: "tokens"},
		{NonResourceURLs: []string{"/readyz"}, Verbs: []string{"get"}},
		{BoundRole: "system:kube-scheduler"},
	}
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, rules))
	got, err := Read(buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, rules, got)
	_, err = Read([]byte("[]"))
	require.ErrorContains(t, err, "none listed")
	_, err = Read([]byte("nestlet: unknown flag"))
	require.Error(t, err)
}
