package chart

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nestlet/nestlet/nestctl"
	"github.com/nestlet/nestlet/pkg/permissions"
	"github.com/nestlet/nestlet/provider/agent"
	"github.com/nestlet/nestlet/provider/noderoutes"
	"github.com/nestlet/nestlet/proxy"
	"github.com/nestlet/nestlet/scheduler-plugins/profile"
)

// TestRBACLeastPrivilege: the chart grants each component exactly what its
// code lists as needed (its Permissions, kept beside that code), no
// wildcard and nothing more, with every component rendered.
func TestRBACLeastPrivilege(t *testing.T) {
	objs := objects(t, render(t, testdata("values-all.yaml")))
	want := map[string][]permissions.Rule{
		"agent":     withLease(agent.Permissions, agent.LeaseNamePlaceholder, release+"-agent"),
		"proxy":     proxy.Permissions,
		"scheduler": withLease(profile.Permissions, profile.LeaseNamePlaceholder, release+"-scheduler"),
		"leave":     nestctl.LeavePermissions,
		"routes":    withLease(noderoutes.Permissions, noderoutes.DaemonSetNamePlaceholder, release+"-routes"),
	}
	for component, needed := range want {
		t.Run(component, func(t *testing.T) {
			granted := grantedTo(t, objs, release+"-"+component)
			require.Empty(t, permissions.Wildcards(granted), "wildcards granted to the %s", component)
			need, have := permissions.Grants(needed, namespace), permissions.Grants(granted, namespace)
			require.Empty(t, without(have, need), "the chart grants the %s what its Permissions do not list (a grant nothing uses)", component)
			require.Empty(t, without(need, have), "the %s's Permissions list what the chart does not grant (a use nothing grants)", component)
		})
	}
}

// withLease returns perms with their Lease (or another object named after
// the release) named.
func withLease(perms []permissions.Rule, placeholder, lease string) []permissions.Rule {
	out := make([]permissions.Rule, len(perms))
	for i, r := range perms {
		names := make([]string, len(r.ResourceNames))
		for j, n := range r.ResourceNames {
			names[j] = strings.ReplaceAll(n, placeholder, lease)
		}
		r.ResourceNames = names
		out[i] = r
	}
	return out
}

// grantedTo returns the rules the rendered bindings give the ServiceAccount
// sa of the release namespace: the rules of the roles the chart renders,
// and the roles it does not render (Kubernetes' own) as bound roles.
func grantedTo(t *testing.T, objs []*unstructured.Unstructured, sa string) []permissions.Rule {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{} // "<kind>/<namespace>/<name>"
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			into(t, o, &r)
			roles["ClusterRole//"+r.Name] = r.Rules
		case "Role":
			var r rbacv1.Role
			into(t, o, &r)
			roles["Role/"+r.Namespace+"/"+r.Name] = r.Rules
		}
	}
	var out []permissions.Rule
	for _, o := range objs {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		scope := ""
		switch o.GetKind() {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			into(t, o, &b)
			subjects, ref = b.Subjects, b.RoleRef
		case "RoleBinding":
			var b rbacv1.RoleBinding
			into(t, o, &b)
			subjects, ref, scope = b.Subjects, b.RoleRef, b.Namespace
		default:
			continue
		}
		if !boundTo(subjects, sa) {
			continue
		}
		key := ref.Kind + "/" + scope + "/" + ref.Name
		if ref.Kind == "ClusterRole" {
			key = "ClusterRole//" + ref.Name
		}
		rules, rendered := roles[key]
		if !rendered {
			out = append(out, permissions.Rule{Namespace: scope, BoundRole: ref.Name})
			continue
		}
		for _, r := range rules {
			out = append(out, permissions.Rule{Namespace: scope, APIGroups: r.APIGroups, Resources: r.Resources,
				ResourceNames: r.ResourceNames, Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
		}
	}
	require.NotEmpty(t, out, "nothing is bound to %s", sa)
	return out
}

func boundTo(subjects []rbacv1.Subject, sa string) bool {
	for _, s := range subjects {
		if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace {
			return true
		}
	}
	return false
}

// without returns the elements of a not in b.
func without(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}
