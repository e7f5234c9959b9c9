package permissions

import (
	"testing"

	"github.com/stretchr/testify/require"
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
