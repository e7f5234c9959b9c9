package api

// Every key that two components, the chart or the tests agree on: names of
// resources, labels, annotations, finalizers, taints and ConfigMap keys.
// Reasons of pods and events are in reasons.go.
const (
	// GroupName is the API group of Nestlet's resources.
	GroupName = "nestlet.io"
	// DefaultNamespace is where the agent keeps node identities and where
	// `nestctl join` stores bootstrap tokens, unless told otherwise.
	DefaultNamespace = "nestlet-system"
	// FieldManager is the field manager of the agent's writes, in its own
	// cluster and, as the node identity, in its parents.
	FieldManager = "nestlet"

	// FinalizerCleanup holds a Target until the agent has removed its
	// virtual node from the parent and forgotten its identity. `nestctl
	// join` and the chart create Targets with it (the agent adds it to one
	// created without it, a write more per join): a Target deleted while no
	// agent runs in the cluster stays until one does, or until the
	// finalizer is removed by hand.
	FinalizerCleanup = "nestlet.io/cleanup"

	// LabelCluster is set on a virtual node to the name of the child
	// cluster it stands for.
	LabelCluster = "nestlet.io/cluster"
	// LabelNodeRoleCluster is set by the parent's own agent on the virtual
	// nodes of its children (a node may not set node-role labels itself),
	// so that `kubectl get nodes` shows ROLES cluster.
	LabelNodeRoleCluster = "node-role.kubernetes.io/cluster"
	// LabelNodeType marks virtual-kubelet nodes, as virtual-kubelet does.
	LabelNodeType = "type"
	// NodeTypeVirtualKubelet is the value of LabelNodeType on virtual nodes.
	NodeTypeVirtualKubelet = "virtual-kubelet"

	// AnnotationSummary holds the JSON Summary of the child's subtree.
	AnnotationSummary = "nestlet.io/summary"
	// AnnotationClusterUID identifies the child cluster that owns a virtual
	// node (the UID of its kube-system namespace), so that a child never
	// takes over a node of the same name that is not its own.
	AnnotationClusterUID = "nestlet.io/cluster-uid"
	// AnnotationLeaving is set by a child on its virtual node when it
	// leaves (its Target deleted), to its AnnotationClusterUID: the
	// parent's agent deletes the node. A node may not delete itself (it
	// could then register again without the provider taint).
	AnnotationLeaving = "nestlet.io/leaving"
	// AnnotationDesiredTaints carries the taints of Target.spec.taints as
	// JSON; the parent's agent applies them (a node may not change its own
	// taints after creation).
	AnnotationDesiredTaints = "nestlet.io/desired-taints"
	// AnnotationAppliedTaints is set by the parent's agent on a child's
	// virtual node: JSON list of the taint keys it applied from
	// AnnotationDesiredTaints, so that it removes those, and only those,
	// when the child no longer asks for them: every other taint (an
	// admin's) stays.
	AnnotationAppliedTaints = "nestlet.io/applied-taints"
	// AnnotationAvoid is set by a child on its virtual node: JSON mapping
	// the UID of a pod owner (a ReplicaSet, a Job...) to the time (RFC 3339)
	// until which the parent's scheduler should not send that owner's pods
	// here, because one of them bounced back.
	AnnotationAvoid = "nestlet.io/avoid"
	// AnnotationPodCIDROverlap is set by the parent's agent on a child's
	// virtual node: "none" when the pod CIDRs of the child's subtree
	// overlap no other node or child of the parent, else what they
	// overlap. The child reports it on its Target (a node identity may
	// read no other node, so only the parent can compare).
	AnnotationPodCIDROverlap = "nestlet.io/pod-cidr-overlap"
	// AnnotationPodCIDRsRefused is set by the parent's agent on a child's
	// virtual node: "none" when every pod CIDR the child claims is
	// granted (PodCIDRGrantsConfigMap), else which parts are not and why.
	// What is refused is routed nowhere, carried up nowhere and told to no
	// sibling. The child reports it as ConditionPodCIDRsGranted.
	AnnotationPodCIDRsRefused = "nestlet.io/pod-cidrs-refused"
	// AnnotationGatewayKey is set by a child on its virtual node: the
	// public key of its gateway (WireGuard, base64), with which the parent
	// makes the child's gateway its peer and routes the child's pod CIDRs
	// (its summary's) to it.
	AnnotationGatewayKey = "nestlet.io/gateway-public-key"
	// AnnotationGatewayParent is set by the parent's agent on a child's
	// virtual node: JSON GatewayParent, what the child's gateway needs to
	// dial the parent's as its peer and what to route to it.
	AnnotationGatewayParent = "nestlet.io/gateway-parent"
	// AnnotationGatewayTunnel is set by a child on its virtual node: the
	// state of its gateway's peer link to the parent's ("up", "down", "no
	// endpoint", "no gateway in the parent"), written when it changes; the
	// Target's Tunnel condition says more. (The name predates the word
	// "peer" for the WireGuard link and is kept for compatibility.)
	AnnotationGatewayTunnel = "nestlet.io/gateway-tunnel"
	// AnnotationGatewayTunnelStats is set by a child on its virtual node
	// beside AnnotationGatewayTunnel: JSON PeerStats.
	AnnotationGatewayTunnelStats = "nestlet.io/gateway-tunnel-stats"
	// AnnotationGatewaySubtree is set by a child on its virtual node:
	// JSON []GatewayEntry, the gateways of its subtree that other
	// clusters may dial directly (the parent keeps of each no more routes
	// than it grants the child).
	AnnotationGatewaySubtree = "nestlet.io/gateway-subtree"
	// AnnotationGatewayPaths is set by a child on its virtual node: JSON
	// []DirectPath, its direct paths and their state.
	AnnotationGatewayPaths = "nestlet.io/gateway-paths"
	// AnnotationTokenChildName is set by `nestctl token create
	// --child-name` on the bootstrap token's Secret: the one node name the
	// token may join as. AnnotationTokenAutoApprove ("true") lets the
	// parent's agent approve that join without `nestctl approve`.
	AnnotationTokenChildName   = "nestlet.io/child-name"
	AnnotationTokenAutoApprove = "nestlet.io/auto-approve"
	// GroupTokenChildPrefix + the child's name and GroupTokenAutoApprove
	// are the extra groups (auth-extra-groups) of such a token: the API
	// server puts them in every request the token makes, so the parent's
	// agent reads the grant from the certificate request itself and
	// never needs to read Secrets of kube-system.
	GroupTokenChildPrefix = "system:bootstrappers:nestlet:child:"
	GroupTokenAutoApprove = "system:bootstrappers:nestlet:auto-approve"
	// ManagedByRemoteEndpoints is the endpointslice.kubernetes.io/managed-by
	// of the EndpointSlices a child's agent makes for a Service reflected
	// there: the parent's endpoints outside the child's subtree. The
	// child's endpointslice controller leaves them alone.
	ManagedByRemoteEndpoints = "remote-endpoints.nestlet.io"
	// PodCIDROverlapNone is AnnotationPodCIDROverlap's value when nothing
	// overlaps.
	PodCIDROverlapNone = "none"
	// AnnotationOwnerUID is set on a delegate to the UID of the original
	// pod's controller (the ReplicaSet, Job... in the cluster where the pod
	// was created), carried along every hop; avoidance is keyed by it.
	AnnotationOwnerUID = "nestlet.io/owner-uid"
	// AnnotationOrigin is set on a delegate pod to "<parent cluster>/<parent
	// pod UID>".
	AnnotationOrigin = "nestlet.io/origin"
	// LabelTargetUID marks the delegates (and copied objects) of one
	// Target in the child: the Target's UID, which fits a label value.
	LabelTargetUID = "nestlet.io/target-uid"
	// AnnotationParentPod is set on a delegate to "<namespace>/<name>" of
	// its parent pod.
	AnnotationParentPod = "nestlet.io/parent-pod"
	// AnnotationResources is set on a delegate to a digest of its parent
	// pod's containers' resources when it was made or last resized: the
	// parent pod's resized since when they differ (this cluster's
	// admission may have changed the delegate's own).
	AnnotationResources = "nestlet.io/resources"
	// AnnotationOwnerKind is set on a delegate to the kind of the original
	// pod's controller (Job, ReplicaSet, ...), kept along every hop, for
	// tools that look at delegates.
	AnnotationOwnerKind = "nestlet.io/owner-kind"
	// AnnotationCopiedFrom marks a ConfigMap or Secret copied from a
	// parent into a child along with the pods that use it.
	AnnotationCopiedFrom = "nestlet.io/copied-from"
	// AnnotationPath is set on a delegate pod to the comma-separated cluster
	// names it has passed through, itself last.
	AnnotationPath = "nestlet.io/path"
	// AnnotationNamespaceClusters, on a namespace, says which of this
	// cluster's children its pods may go to: a label selector over the
	// virtual nodes (kubectl's syntax: "topology.kubernetes.io/region=east",
	// "nestlet.io/cluster in (east,west)"), or NamespaceClustersNone for
	// none. Without it, a namespace's pods may go to any child, but those
	// of the SystemNamespaces, which stay (docs/tenants.md). Nestlet's
	// scheduler enforces it (the NamespacePolicy plugin).
	AnnotationNamespaceClusters = "nestlet.io/clusters"
	// NamespaceClustersNone keeps a namespace's pods in this cluster.
	NamespaceClustersNone = "none"
	// AnnotationIdentity is set on a delegate whose service account tokens
	// are its parent pod's, issued by the parent's API server: the name of
	// the Secret here that holds them (provider/forward/pod_api_identity.go).
	AnnotationIdentity = "nestlet.io/identity-secret"
	// AnnotationIdentityOf marks such a Secret: "<parent cluster>/<parent
	// pod UID>".
	AnnotationIdentityOf = "nestlet.io/identity-of"
	// AnnotationDomains is set, by the scheduler's binding, on a pod bound
	// to a virtual node: the topology domains (label key to value, as
	// JSON) it chose for the pod inside the child, so that the pod's
	// topology spread is judged once, where every domain is seen. The
	// delegate is sent there by a nodeSelector, without those constraints.
	AnnotationDomains = "nestlet.io/topology-domains"

	// StorageProvisioner is the provisioner of StorageClassName, run by the
	// agent of every cluster for claims whose first pod goes to one of its
	// children (provider/parent/volumes.go): the volume made is a promise
	// pinned to that child's virtual node, kept by the claim the child
	// makes of the same name.
	StorageProvisioner = "nestlet.io/subtree"
	// StorageClassName is the StorageClass of StorageProvisioner the
	// chart and the launcher create.
	StorageClassName = "nestlet"
	// AnnotationClaimPrefix, followed by a parent claim's UID, is set on a
	// virtual node by the parent's provisioner for each volume it pinned
	// there, to "<namespace>/<name>" of the claim, and removed when the
	// volume is deleted (per its reclaim policy): the child reads its own
	// node to know which of its claims still stand for a parent's.
	AnnotationClaimPrefix = "claim.nestlet.io/"
	// AnnotationOriginClaim is set on a claim a child made for a parent's:
	// "<parent cluster>/<parent claim UID>".
	AnnotationOriginClaim = "nestlet.io/origin-claim"
	// AnnotationClaimFollowsParent is set to "true" on such a claim when
	// the parent's provisioner pinned the parent's volume to the virtual
	// node (AnnotationClaimPrefix): only those are deleted when the
	// parent's volume is; any other stays until deleted here.
	AnnotationClaimFollowsParent = "nestlet.io/claim-follows-parent"

	// TaintKeyProvider is the key of the taint every virtual node carries,
	// with value TaintValueProvider and effect NoSchedule, to keep
	// DaemonSets and foreign schedulers off.
	TaintKeyProvider   = "virtual-kubelet.io/provider"
	TaintValueProvider = "nestlet"

	// RevokedConfigMap is the ConfigMap in kube-system listing the
	// children a parent cut off (`nestctl revoke`): each key a child's node
	// name, its value when and why. A revoked child's certificate requests
	// are denied (renewals too), its virtual node deleted whenever it
	// appears, and its tunnels to nestlet-proxy closed and refused.
	// Removing its key lifts the revocation (a new token is still needed).
	RevokedConfigMap = "nestlet-revoked"

	// QuotasConfigMap is the ConfigMap in kube-system holding, for each
	// child (key: its node name), the most its virtual node may claim
	// (value: "cpu=8,memory=16Gi,pods=220", pkg/quota), set by the
	// parent's admin (`nestctl quota`, `nestctl token create --quota`). The
	// scheduler places no more on a virtual node than its quota, whatever
	// the child claims; the parent's agent warns on a node that claims
	// more. A child without a quota is believed.
	QuotasConfigMap = "nestlet-quotas"

	// PodCIDRGrantsConfigMap is the ConfigMap in kube-system holding, for
	// each child (key: its node name), the pod CIDRs it may claim (value:
	// "10.1.0.0/16,fd00:1::/48", pkg/podcidrs), set by the parent's admin
	// (`nestctl grant`, `nestctl token create --pod-cidrs`), as node IPAM
	// grants a node its pod CIDR. A child's claim (its summary's pod CIDRs)
	// is routed to it, carried up and told to its siblings only where
	// granted: by this ConfigMap, or, for a child without a key here, from
	// the agent's pool (--pod-cidr-pool), first come, at most a pool share
	// each, the shares held in ChildrenConfigMap. Never the parent's own
	// pod CIDRs, Service CIDRs or node addresses.
	PodCIDRGrantsConfigMap = "nestlet-pod-cidrs"
	// ChildrenConfigMap is the ConfigMap in the agent's namespace where a
	// parent's agent records the children it knows (key: the child's node
	// name; every name it approved a join for or saw a virtual node of),
	// and each one's share of its pod CIDR pool (value: CIDRs, "" for
	// none): a node of a known name is held to a child's rules whatever
	// labels and taints it comes back with, and a range a child holds is
	// not given to another, across restarts.
	ChildrenConfigMap = "nestlet-children"
	// ChildrenKeyTaintEffect is the key of ChildrenConfigMap, which no
	// node name can take, holding the effect the parent gives its
	// children's provider taint: the admission policy nestlet-children
	// lets DaemonSets' pods onto children's nodes only where it is
	// PreferNoSchedule (TakesDaemonSets).
	ChildrenKeyTaintEffect = ".taintEffect"
	// ChildrenFlowSchema is the FlowSchema (and its priority level) of the
	// children's node identities in a parent, a level below its real
	// kubelets', one flow per child: the parent's agent keeps its subjects,
	// one user system:node:<name> per child it knows (ChildrenConfigMap).
	ChildrenFlowSchema = "nestlet-children"

	// ClusterInfoConfigMap is the ConfigMap in kube-public, readable
	// anonymously like cluster-info, where `nestctl token create` records
	// the parent's cluster name (key ClusterInfoNameKey).
	ClusterInfoConfigMap = "nestlet-info"
	ClusterInfoNameKey   = "clusterName"
	// ClusterInfoExtension names the extension of the cluster in
	// kube-public/cluster-info's kubeconfig that holds a copy of
	// ClusterInfoConfigMap's data (a JSON object of strings), written by
	// whoever writes nestlet-info. The bootstrapsigner's signature of that
	// kubeconfig covers it, so a joining child takes it from the read that
	// pins the parent's CA instead of reading nestlet-info as well.
	ClusterInfoExtension = "nestlet.io/info"

	// Keys of ClusterInfoConfigMap written by nestlet-proxy, so that the
	// agents of children find it (trusting the parent's API server, which
	// they reached with a pinned CA):
	//
	// ClusterInfoProxyTunnelURL is the wss:// URL where a child's agent
	// dials in and holds its reverse tunnel.
	ClusterInfoProxyTunnelURL = "proxyTunnelURL"
	// ClusterInfoProxyCA is the PEM bundle that verifies the proxy's
	// serving certificate.
	ClusterInfoProxyCA = "proxyCA"
	// ClusterInfoProxyKubeletEndpoint is the host:port that virtual nodes
	// advertise as their kubelet endpoint: where the parent's API server
	// reaches the proxy.
	ClusterInfoProxyKubeletEndpoint = "proxyKubeletEndpoint"
)

// IdentitySecretName is the Secret, in the agent's namespace, holding the
// node identity (key and certificate in the parent) of Target target.
func IdentitySecretName(target string) string { return "nestlet-identity-" + target }
