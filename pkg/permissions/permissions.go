// Package permissions describes what each Nestlet component does with the
// API of its own cluster, as data kept next to the code that needs it
// (provider/agent, proxy, scheduler-plugins/profile): the chart's RBAC
// grants each component exactly its list, which a test of the rendered
// chart checks both ways (test/e2e/chart), so that a permission nothing
// uses, or a use nothing grants, fails before anyone installs it.
package permissions

import (
	"fmt"
	"sort"
	"strings"
)

// ReleaseNamespace in a Rule's Namespace is the namespace the chart is
// installed in.
const ReleaseNamespace = "<release namespace>"

// Rule is one thing a component does.
type Rule struct {
	// Namespace is where the rule holds: empty for the whole cluster (a
	// ClusterRole bound by a ClusterRoleBinding), else a namespace or
	// ReleaseNamespace (a Role).
	Namespace string
	// APIGroups, Resources, ResourceNames and Verbs are those of an RBAC
	// PolicyRule; NonResourceURLs instead of the resources for paths.
	APIGroups, Resources, ResourceNames, Verbs, NonResourceURLs []string
	// BoundRole names a role of Kubernetes' bootstrap policy the component
	// is bound to whole instead (a ClusterRole; with Namespace, a Role of
	// that namespace), such as system:kube-scheduler.
	BoundRole string
	// Why says which code needs it.
	Why string
}

// Grants flattens rules into one line per permission: scope, group,
// resource, name and verb (or the bound role), sorted, without
// duplicates, with ReleaseNamespace replaced by namespace.
func Grants(rules []Rule, namespace string) []string {
	seen := map[string]bool{}
	for _, r := range rules {
		scope := r.Namespace
		if scope == ReleaseNamespace {
			scope = namespace
		}
		if scope == "" {
			scope = "cluster"
		}
		if r.BoundRole != "" {
			seen[fmt.Sprintf("%s bound-role %s", scope, r.BoundRole)] = true
			continue
		}
		for _, verb := range r.Verbs {
			for _, path := range r.NonResourceURLs {
				seen[fmt.Sprintf("%s url %s %s", scope, path, verb)] = true
			}
			for _, group := range r.APIGroups {
				for _, resource := range r.Resources {
					names := r.ResourceNames
					if len(names) == 0 {
						names = []string{"(any)"}
					}
					for _, name := range names {
						seen[fmt.Sprintf("%s %s/%s %s %s", scope, orCore(group), resource, name, verb)] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

func orCore(group string) string {
	if group == "" {
		return "core"
	}
	return group
}

// Wildcards returns the grants of rules that use "*" for a group, a
// resource, a verb or a path.
func Wildcards(rules []Rule) []string {
	var out []string
	for _, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.NonResourceURLs} {
			for _, v := range list {
				if strings.Contains(v, "*") {
					out = append(out, fmt.Sprintf("%+v", r))
				}
			}
		}
	}
	return out
}
