package framework

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nestlet/nestlet/launcher"
)

// A refusal of what the chart grants is an API server that has just
// started (its authorizer not loaded yet); one of what it does not grant
// is a permission the chart lacks.
func TestRefusedUngranted(t *testing.T) {
	ids := ChartIdentities()
	granted := []string{
		`E1126 creating namespace t-1 in east: namespaces is forbidden: User "system:serviceaccount:nestlet-system:nestlet-agent" cannot create resource "namespaces" in API group "" at the cluster scope`,
		`"Failed to watch" err="configmaps "nestlet-revoked" is forbidden: User "system:serviceaccount:nestlet-system:nestlet-agent" cannot watch resource "configmaps" in API group "" in the namespace "kube-system"`,
		`"Failed to watch" err="secrets is forbidden: User "system:serviceaccount:nestlet-system:nestlet-agent" cannot watch resource "secrets" in API group "" in the namespace "nestlet-system"`,
		`pods is forbidden: User "system:serviceaccount:nestlet-system:nestlet-proxy" cannot list resource "pods" in API group "" at the cluster scope`,
	}
	for _, line := range granted {
		require.False(t, refusedUngranted(ids, line), line)
	}
	ungranted := []string{
		// The chart lacked get on Services once.
		`services "api" is forbidden: User "system:serviceaccount:nestlet-system:nestlet-agent" cannot patch resource "services" in API group "" in the namespace "t-868887587"`,
		`configmaps "other" is forbidden: User "system:serviceaccount:nestlet-system:nestlet-agent" cannot watch resource "configmaps" in API group "" in the namespace "kube-system"`,
		`secrets is forbidden: User "system:serviceaccount:nestlet-system:nestlet-proxy" cannot list resource "secrets" in API group "" at the cluster scope`,
		// Unreadable: counted, to be looked at.
		`something forbidden for system:serviceaccount:nestlet-system:nestlet-agent`,
	}
	for _, line := range ungranted {
		require.True(t, refusedUngranted(ids, line), line)
	}
	require.Contains(t, ids, launcher.ComponentAgent)
}
