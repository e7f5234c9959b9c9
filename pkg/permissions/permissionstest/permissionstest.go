// Package permissionstest checks, in unit tests, that the requests a
// component made against a fake clientset are what its permissions grant,
// judged as the API server's RBAC authorizer judges them: a use nothing
// grants fails in `go test`, before an e2e finds the component refused.
package permissionstest

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	k8stesting "k8s.io/client-go/testing"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"

	"github.com/nestlet/nestlet/pkg/permissions"
)

// Denied returns, one line each, the actions that rules do not allow, with
// permissions.ReleaseNamespace standing for namespace. Rules that bind a
// bootstrap role (BoundRole) allow nothing here.
func Denied(rules []permissions.Rule, namespace string, actions []k8stesting.Action) []string {
	rbac := permissions.ToRBAC(rules, "checked", namespace, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "checked"}, nil)
	var cluster []rbacv1.PolicyRule
	for _, r := range rbac.ClusterRoles {
		cluster = append(cluster, r.Rules...)
	}
	byNamespace := map[string][]rbacv1.PolicyRule{}
	for _, r := range rbac.Roles {
		byNamespace[r.Namespace] = append(byNamespace[r.Namespace], r.Rules...)
	}
	var out []string
	for _, a := range actions {
		attrs := Attributes(a)
		if rbacauthorizer.RulesAllow(attrs, cluster...) || rbacauthorizer.RulesAllow(attrs, byNamespace[attrs.Namespace]...) {
			continue
		}
		line := fmt.Sprintf("%s %s", attrs.Verb, attrs.Resource)
		if attrs.Subresource != "" {
			line += "/" + attrs.Subresource
		}
		if attrs.APIGroup != "" {
			line += "." + attrs.APIGroup
		}
		if attrs.Namespace != "" {
			line += " in " + attrs.Namespace
		}
		if attrs.Name != "" {
			line += " named " + attrs.Name
		}
		if !slices.Contains(out, line) {
			out = append(out, line)
		}
	}
	return out
}

// Attributes are what the authorizer is asked about a fake clientset's
// action: its verb as RBAC names it, its resource, namespace and, where the
// request's URL carries one, the object's name (a create's does not; a
// list or watch by metadata.name field selector is judged by that name).
func Attributes(a k8stesting.Action) authorizer.AttributesRecord {
	attrs := authorizer.AttributesRecord{
		User:            &user.DefaultInfo{Name: "checked"},
		Verb:            a.GetVerb(),
		APIGroup:        a.GetResource().Group,
		APIVersion:      a.GetResource().Version,
		Resource:        a.GetResource().Resource,
		Subresource:     a.GetSubresource(),
		Namespace:       a.GetNamespace(),
		ResourceRequest: true,
	}
	switch a := a.(type) {
	case k8stesting.GetAction: // and deletes and patches, which name their object alike
		attrs.Name = a.GetName()
	case k8stesting.UpdateAction:
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			attrs.Name = m.GetName()
		}
	case k8stesting.ListAction:
		if f := a.GetListRestrictions().Fields; f != nil {
			attrs.Name, _ = f.RequiresExactMatch("metadata.name")
		}
	case k8stesting.WatchAction:
		if f := a.GetWatchRestrictions().Fields; f != nil {
			attrs.Name, _ = f.RequiresExactMatch("metadata.name")
		}
	}
	if attrs.Verb == "delete-collection" {
		attrs.Verb = "deletecollection"
	}
	return attrs
}
