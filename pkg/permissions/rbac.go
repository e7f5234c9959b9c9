package permissions

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RBAC is the RBAC that grants a subject a component's rules, as the chart
// grants them: the cluster-wide rules in one ClusterRole, each namespace's
// in a Role there, each bound role by a binding of its own.
type RBAC struct {
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding
}

// ToRBAC turns rules into RBAC objects named after name (a ClusterRole and
// Roles "name", bindings "name" and "name:<bound role>") for subject, with
// ReleaseNamespace replaced by namespace and each resource name in names
// (a placeholder such as the agent's Lease) by its value.
func ToRBAC(rules []Rule, name, namespace string, subject rbacv1.Subject, names map[string]string) RBAC {
	var out RBAC
	byScope := map[string][]rbacv1.PolicyRule{}
	var scopes []string
	for _, r := range rules {
		scope := r.Namespace
		if scope == ReleaseNamespace {
			scope = namespace
		}
		if r.BoundRole != "" {
			out.bind(r.BoundRole, name+":"+strings.ReplaceAll(r.BoundRole, ":", "-"), scope, subject)
			continue
		}
		if _, ok := byScope[scope]; !ok {
			scopes = append(scopes, scope)
		}
		rule := rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs}
		for _, n := range r.ResourceNames {
			if v, ok := names[n]; ok {
				n = v
			}
			rule.ResourceNames = append(rule.ResourceNames, n)
		}
		byScope[scope] = append(byScope[scope], rule)
	}
	for _, scope := range scopes {
		meta := metav1.ObjectMeta{Name: name, Namespace: scope}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
		if scope == "" {
			out.ClusterRoles = append(out.ClusterRoles, rbacv1.ClusterRole{ObjectMeta: meta, Rules: byScope[scope]})
			ref.Kind = "ClusterRole"
			out.ClusterRoleBindings = append(out.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: []rbacv1.Subject{subject}})
			continue
		}
		out.Roles = append(out.Roles, rbacv1.Role{ObjectMeta: meta, Rules: byScope[scope]})
		out.RoleBindings = append(out.RoleBindings, rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: []rbacv1.Subject{subject}})
	}
	return out
}

// bind binds subject to a role of the bootstrap policy: a ClusterRole
// across the cluster (no scope), a Role of namespace scope.
func (out *RBAC) bind(role, name, scope string, subject rbacv1.Subject) {
	meta := metav1.ObjectMeta{Name: name, Namespace: scope}
	if scope == "" {
		out.ClusterRoleBindings = append(out.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: meta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: []rbacv1.Subject{subject}})
		return
	}
	out.RoleBindings = append(out.RoleBindings, rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}, Subjects: []rbacv1.Subject{subject}})
}
