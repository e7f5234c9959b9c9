package agent

import "github.com/nestlet/nestlet/pkg/permissions"

// Permissions are what the agent does in its OWN cluster; the chart grants
// exactly these (charts/nestlet/templates/agent-rbac.yaml, checked by
// test/e2e/chart). In its parents it acts with the node identity it
// obtained there (system:node:<clusterName>), which the parents' Node
// authorizer and NodeRestriction bound. Not needed here, so not granted:
// leases but its own (the virtual nodes' leases live in the parents), creating
// certificatesigningrequests (created in the parents with the bootstrap
// token).
var Permissions = []permissions.Rule{
	{APIGroups: []string{"nestlet.io"}, Resources: []string{"targets"}, Verbs: []string{"get", "list", "watch", "update"},
		Why: "Targets are watched, a finalizer is added and removed on them (provider/child/controller.go)"},
	{APIGroups: []string{"nestlet.io"}, Resources: []string{"targets/status"}, Verbs: []string{"update"},
		Why: "a Target's status carries its conditions (provider/child/controller.go)"},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create", "delete"},
		Why: "the UID of kube-system identifies this cluster (nestlet.io/cluster-uid on its virtual nodes); the agent's own namespace at start, " +
			"and each delegate's, on demand; those it made are watched and deleted once idle (provider/forward/namespace_keeper.go), " +
			"the admission policy confining the deletes to namespaces it labelled"},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "update", "patch", "delete"},
		Why: "the summary's node informer; as a parent, its children's virtual nodes: role label, asked taints (provider/parent/decorator.go), " +
			"deleted when a child leaves or is revoked (provider/parent/removal.go)"},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		Why: "the summary's pod informer, and the delegates (provider/forward; patch: a held delegate's release, provider/forward/reserve.go)"},
	{APIGroups: []string{""}, Resources: []string{"pods/resize", "pods/ephemeralcontainers"}, Verbs: []string{"update"},
		Why: "a parent pod resized in place is resized here, and given the ephemeral containers it was (kubectl debug; provider/forward/lifecycle.go)"},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"},
		Why: "the virtual node's kubelet API (pkg/kubeletapi): logs of a parent pod are its delegate's"},
	{APIGroups: []string{""}, Resources: []string{"pods/exec", "pods/attach", "pods/portforward"}, Verbs: []string{"get", "create"},
		Why: "the virtual node's kubelet API: exec, attach and port-forward of the delegate (WebSockets start with a GET)"},
	{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"},
		Why: "the virtual node's stats summary adds up its nodes' own"},
	{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"create", "patch", "delete"},
		Why: "copies of the parent pods' ConfigMaps and Secrets, written without reading any (provider/forward/copies.go): " +
			"created, patched under a test of their label, deleted once unused; the admission policy confines these writes to labelled copies"},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"},
		Why: "the parent's Services its pods use are copied here, kept in step and collected; one of the same name found here is read " +
			"to tell a copy from one Nestlet did not make (provider/forward/services.go)"},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch", "create", "update", "delete"},
		Why: "the parent's endpoints outside this subtree, as EndpointSlices of their own (provider/forward/remote_endpoints.go)"},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch", "create", "patch"},
		Why: "the delegates' Warning events recorded again on their parent pods (provider/forward/events.go), and its own events"},
	{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: []string{"get", "create", "delete"},
		Why: "a PriorityClass a forwarded pod names, missing here; a copy it made whose value the parent's pods no longer carry is read, " +
			"deleted and made again (provider/forward/classes.go); the admission policy confines the deletes to its labelled copies"},
	{APIGroups: []string{"node.k8s.io"}, Resources: []string{"runtimeclasses"}, Verbs: []string{"create"},
		Why: "a RuntimeClass a forwarded pod names, missing here, as the parent has it (provider/forward/classes.go)"},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		Why: "the claims of forwarded pods, made here and deleted once the parent's volume is gone (provider/forward/claims.go); " +
			"as a parent, the claims of the nestlet StorageClass, watched and updated by the provisioner (provider/parent/volumes.go)"},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "delete"},
		Why: "as a parent, the volumes of the nestlet StorageClass, pinned to a child's virtual node (provider/parent/volumes.go)"},
	{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"servicecidrs"}, Verbs: []string{"get", "list", "watch"},
		Why: "as a parent, this cluster's Service CIDRs, never granted to a child (provider/parent/reserved.go)"},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"},
		Why: "as a parent, the provisioner reads the classes it serves (provider/parent/volumes.go)"},
	{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"create"},
		Why: "the ServiceAccount a delegate runs as"},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"},
		Why: "as a parent, its children's node certificate requests (provider/parent/approver.go)"},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"},
		Why: "as a parent, approving or denying them (provider/parent/approver.go)"},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, Verbs: []string{"approve"},
		ResourceNames: []string{"kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"},
		Why:           "the node client certificates of children, and the serving certificates of those in direct mode (provider/parent/approver.go)"},
	{APIGroups: []string{"flowcontrol.apiserver.k8s.io"}, Resources: []string{"flowschemas"}, ResourceNames: []string{"nestlet-children"},
		Verbs: []string{"get", "update"},
		Why:   "as a parent, the children it knows are the subjects of their FlowSchema, a priority level below its kubelets' (provider/parent/children.go)"},
	{NonResourceURLs: []string{"/readyz"}, Verbs: []string{"get"},
		Why: "a virtual node is Ready only while this cluster's API server is"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{""}, Resources: []string{"secrets"},
		Verbs: []string{"get", "list", "watch", "create", "update", "delete"},
		Why: "the bootstrap tokens the Targets name and the node identities (provider/join/node_identity.go) live in its namespace, " +
			"the only one where it reads Secrets; watched so that a join reads none (provider/child/secrets.go)"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"},
		Why: "each Target's ledger of the copies it made (provider/forward/copies_ledger.go), read after a restart to collect them; " +
			"as a parent, the children it knows and their shares of its pod CIDR pool (provider/parent/children.go)"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"},
		Why: "leader election among replicas (cmd/nestlet --leader-elect, pkg/kubeclient/leader.go): the first makes the Lease"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		ResourceNames: []string{LeaseNamePlaceholder}, Verbs: []string{"get", "update"},
		Why: "leader election: the Lease is read and renewed by name"},
	{Namespace: "kube-system", APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"nestlet-revoked", "nestlet-quotas", "nestlet-pod-cidrs"},
		Verbs: []string{"get", "list", "watch"},
		Why:   "as a parent, the children cut off (provider/parent/removal.go), their capacity quotas (provider/parent/quotas.go) and the pod CIDRs granted them (provider/parent/grants.go)"},
}

// LeaseNamePlaceholder in Permissions is the agent's Lease, the release's
// "<fullname>-agent" (--leader-elect-resource-name).
const LeaseNamePlaceholder = "<fullname>-agent"
