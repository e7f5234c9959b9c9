package agent

import (
	"slices"

	"github.com/nestlet/nestlet/pkg/permissions"
	"github.com/nestlet/nestlet/provider/forward"
)

// Permissions are what the agent does in its OWN cluster, the forwarder's
// (provider/forward.Permissions, checked by that package's unit tests)
// among them; the chart grants exactly these
// (charts/nestlet/templates/agent-rbac.yaml, checked by test/e2e/chart).
// In its parents it acts with the node identity it
// obtained there (system:node:<clusterName>), which the parents' Node
// authorizer and NodeRestriction bound. Not needed here, so not granted:
// leases but its own (the virtual nodes' leases live in the parents), creating
// certificatesigningrequests (created in the parents with the bootstrap
// token).
var Permissions = slices.Concat(forward.Permissions, []permissions.Rule{
	{APIGroups: []string{"nestlet.io"}, Resources: []string{"targets"}, Verbs: []string{"get", "list", "watch", "update"},
		Why: "Targets are watched, a finalizer is added and removed on them (provider/child/controller.go)"},
	{APIGroups: []string{"nestlet.io"}, Resources: []string{"targets/status"}, Verbs: []string{"update"},
		Why: "a Target's status carries its conditions (provider/child/controller.go)"},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"},
		Why: "the UID of kube-system identifies this cluster (nestlet.io/cluster-uid on its virtual nodes); the agent's own namespace at start"},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "update", "patch", "delete"},
		Why: "the summary's node informer; as a parent, its children's virtual nodes: role label, asked taints (provider/parent/decorator.go), " +
			"deleted when a child leaves or is revoked (provider/parent/removal.go)"},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"},
		Why: "the summary's pod informer"},
	{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"},
		Why: "the virtual node's kubelet API (pkg/kubeletapi): logs of a parent pod are its delegate's"},
	{APIGroups: []string{""}, Resources: []string{"pods/exec", "pods/attach", "pods/portforward"}, Verbs: []string{"get", "create"},
		Why: "the virtual node's kubelet API: exec, attach and port-forward of the delegate (WebSockets start with a GET)"},
	{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"},
		Why: "the virtual node's stats summary adds up its nodes' own"},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"},
		Why: "its own events"},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "update", "patch"},
		Why: "as a parent, the claims of the nestlet StorageClass, watched and updated by the provisioner (provider/parent/volumes.go)"},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "create", "delete"},
		Why: "as a parent, the volumes of the nestlet StorageClass, pinned to a child's virtual node (provider/parent/volumes.go)"},
	{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"servicecidrs"}, Verbs: []string{"get", "list", "watch"},
		Why: "as a parent, this cluster's Service CIDRs, never granted to a child (provider/parent/reserved.go)"},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"},
		Why: "as a parent, the provisioner reads the classes it serves (provider/parent/volumes.go)"},
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
		Why: "as a parent, the children it knows and their shares of its pod CIDR pool (provider/parent/children.go)"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"},
		Why: "leader election among replicas (cmd/nestlet --leader-elect, pkg/kubeclient/leader.go): the first makes the Lease"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		ResourceNames: []string{LeaseNamePlaceholder}, Verbs: []string{"get", "update"},
		Why: "leader election: the Lease is read and renewed by name"},
	{Namespace: "kube-system", APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"nestlet-revoked", "nestlet-quotas", "nestlet-pod-cidrs"},
		Verbs: []string{"get", "list", "watch"},
		Why:   "as a parent, the children cut off (provider/parent/removal.go), their capacity quotas (provider/parent/quotas.go) and the pod CIDRs granted them (provider/parent/grants.go)"},
})

// LeaseNamePlaceholder in Permissions is the agent's Lease, the release's
// "<fullname>-agent" (--leader-elect-resource-name).
const LeaseNamePlaceholder = "<fullname>-agent"
