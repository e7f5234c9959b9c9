package forward

import "github.com/nestlet/nestlet/pkg/permissions"

// Permissions are what the forwarder does in its own cluster (the child
// side of a Target), part of the agent's (provider/agent.Permissions, which
// the chart grants). Every request this package's unit tests see it make
// in the fake cluster is checked against them (permissions_test.go).
var Permissions = []permissions.Rule{
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "delete"},
		Why: "each delegate's namespace, made on demand; those it made are watched and deleted once idle (namespace_keeper.go), " +
			"the admission policy confining the deletes to namespaces it labelled"},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		Why: "the delegates (patch: a held delegate's release, reserve.go)"},
	{APIGroups: []string{""}, Resources: []string{"pods/resize", "pods/ephemeralcontainers"}, Verbs: []string{"update"},
		Why: "a parent pod resized in place is resized here, and given the ephemeral containers it was (kubectl debug; lifecycle.go)"},
	{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"create", "patch", "delete"},
		Why: "copies of the parent pods' ConfigMaps and Secrets, written without reading any (copies.go): " +
			"created, patched under a test of their label, deleted once unused; the admission policy confines these writes to labelled copies"},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"},
		Why: "the parent's Services its pods use are copied here, kept in step and collected; one of the same name found here is read " +
			"to tell a copy from one Nestlet did not make (services.go)"},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch", "create", "update", "delete"},
		Why: "the parent's endpoints outside this subtree, as EndpointSlices of their own (remote_endpoints.go)"},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch", "create", "patch"},
		Why: "the delegates' Warning events recorded again on their parent pods (events.go)"},
	{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: []string{"get", "create", "delete"},
		Why: "a PriorityClass a forwarded pod names, missing here; a copy it made whose value the parent's pods no longer carry is read, " +
			"deleted and made again (classes.go); the admission policy confines the deletes to its labelled copies"},
	{APIGroups: []string{"node.k8s.io"}, Resources: []string{"runtimeclasses"}, Verbs: []string{"create"},
		Why: "a RuntimeClass a forwarded pod names, missing here, as the parent has it (classes.go)"},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		Why: "the claims of forwarded pods, made here and deleted once the parent's volume is gone (claims.go)"},
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"create"},
		Why: "the ServiceAccount a delegate runs as"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"},
		Why: "each Target's ledger of the copies it made (copies_ledger.go), read after a restart to collect them"},
}
