package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Target joins this cluster to a parent cluster, where it appears as a
// virtual node named spec.clusterName. The agent watches Targets: adding,
// changing or deleting one takes effect without a restart. Deleting it
// removes the virtual node from the parent.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tgt
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentURL`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Target struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TargetSpec   `json:"spec"`
	Status TargetStatus `json:"status,omitempty"`
}

// TargetSpec says which parent to join and how this cluster appears there.
//
// +kubebuilder:validation:XValidation:rule="has(self.caCertHash) != has(self.caBundle)",message="set exactly one of caCertHash (sha256:<hex> pin of the parent's CA public key, printed by 'nestctl token create') or caBundle (the parent's CA certificates, PEM)"
type TargetSpec struct {
	// ParentURL is the parent's kube-apiserver, https://host:port.
	//
	// +kubebuilder:validation:Pattern=`^https://[^/?#\s]+(/[^?#\s]*)?$`
	// +kubebuilder:validation:MaxLength=2048
	ParentURL string `json:"parentURL"`

	// ClusterName is this cluster's name in the parent: the name of its
	// virtual node, the value of its nestlet.io/cluster label, and its id
	// on the hop path of forwarded pods. A DNS subdomain (lower case
	// letters, digits, '-' and '.') of at most 63 characters, as a label
	// value must be.
	//
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName"`

	// BootstrapTokenSecretRef names the Secret in this cluster whose key
	// "token" holds the bootstrap token (<id>.<secret>) issued by the parent.
	// It must be in the agent's namespace (nestlet-system by default), the
	// only one where the agent reads Secrets; another is refused with the
	// Joined condition's reason TokenSecretError.
	BootstrapTokenSecretRef SecretReference `json:"bootstrapTokenSecretRef"`

	// CACertHash pins the parent's CA: "sha256:" and the hex SHA-256 of its
	// DER-encoded SubjectPublicKeyInfo, as kubeadm prints it. The CA is
	// discovered through the parent's signed cluster-info ConfigMap.
	//
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +optional
	CACertHash string `json:"caCertHash,omitempty"`

	// CABundle holds the parent's CA certificates (PEM) instead of a pin.
	// Admission checks that it holds PEM certificate blocks (and no
	// private key); the agent parses it and reports one that does not
	// parse on the Target.
	//
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="string(self).contains('-----BEGIN CERTIFICATE-----') && string(self).contains('-----END CERTIFICATE-----')",message="caBundle must hold the parent's CA certificates in PEM (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)"
	// +kubebuilder:validation:XValidation:rule="!string(self).contains('PRIVATE KEY')",message="caBundle holds a private key: give the CA certificates only"
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`

	// ReportFrequency is how often the summary of this cluster is sent to
	// the parent; a significant change is sent sooner, rate-limited.
	//
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="reportFrequency must be between 1s and 1h"
	// +optional
	ReportFrequency metav1.Duration `json:"reportFrequency,omitempty"`

	// Labels are added to the virtual node. Keys NodeRestriction does not
	// let a node set (kubernetes.io and k8s.io prefixes, except
	// topology.kubernetes.io and the kubelet's own) are refused.
	//
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// CapacityPercent is the share, in percent, of this cluster's free
	// capacity offered to this parent. A cluster with several parents (a
	// diamond, primary/backup) must not offer all of it to each: their
	// common ancestors would count it twice. By default the free capacity
	// is split evenly between this cluster's Targets (all of it with one
	// Target); set 100 on each to let parents that share no ancestor see
	// everything.
	//
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	CapacityPercent *int32 `json:"capacityPercent,omitempty"`

	// Taints are added to the virtual node, beside the
	// virtual-kubelet.io/provider=nestlet:NoSchedule taint it always has.
	//
	// +optional
	// +listType=atomic
	Taints []corev1.Taint `json:"taints,omitempty"`

	// StorageClasses maps the StorageClass of a parent's claim to the one
	// the claim made here for it takes, when a pod that uses the claim is
	// forwarded here. A parent class not in the map takes this cluster's
	// default StorageClass.
	//
	// +optional
	StorageClasses map[string]string `json:"storageClasses,omitempty"`

	// WaitForRoom says this cluster can grow (a cluster autoscaler adds
	// nodes for pods that wait): a pod the parent asks a place for that
	// fits no node here now stays here, Pending, for as long as the
	// parent's pod waits, instead of being withdrawn, so that the
	// autoscaler sees it and adds room. Set it on every Target between the
	// root and the clusters that grow.
	//
	// +optional
	WaitForRoom bool `json:"waitForRoom,omitempty"`

	// Namespaces says which of the parent's namespaces this cluster takes
	// pods from, and under which names here (docs/tenants.md). This
	// cluster's own system namespaces (kube-system, kube-public,
	// kube-node-lease, the agent's) never take a parent's pods, whatever
	// it says.
	//
	// +optional
	Namespaces *NamespacePolicy `json:"namespaces,omitempty"`

	// PodSecurity is the Pod Security Standard every pod of this parent
	// must meet here: privileged (no limit), baseline or restricted, as
	// the Pod Security Admission of Kubernetes judges it (latest
	// version). A pod that does not meet it is refused here with the
	// standard's reason, which the parent's pod shows; the namespaces
	// the agent makes for this parent are labelled to enforce it too.
	// Unset: privileged, as before.
	//
	// +kubebuilder:validation:Enum=privileged;baseline;restricted
	// +optional
	PodSecurity string `json:"podSecurity,omitempty"`

	// Limits caps what this parent's pods may request here in all (cpu,
	// memory, ephemeral-storage, pods, extended resources): the virtual
	// node shows the parent at most this much, so that its scheduler does
	// not place more, and a pod that would pass it gets no place here (it
	// stays Pending at the parent with this reason, or goes elsewhere).
	// "storage" caps what the claims made here for its pods request (a
	// pod whose claim would pass it fails with the reason). Unset: no cap
	// beyond what the cluster has.
	//
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// NamespacePolicy is what a Target accepts of the parent's namespaces.
type NamespacePolicy struct {
	// Mapping is how a parent namespace is named here: Same (the same
	// name, the default: two parents' namespaces of one name are one
	// namespace here, and an object one of them copied is never
	// overwritten by the other's) or Prefixed (Prefix and the parent's
	// name: two parents' namespaces never meet here).
	//
	// +kubebuilder:validation:Enum=Same;Prefixed
	// +optional
	Mapping NamespaceMapping `json:"mapping,omitempty"`

	// Prefix, with Mapping Prefixed, starts the name here of every
	// namespace of this parent. Default: the parent's cluster name and
	// "-" (the Target's name where the parent publishes none). A parent
	// namespace whose name here would exceed 63 characters is refused.
	//
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*)?$`
	// +kubebuilder:validation:MaxLength=40
	// +optional
	Prefix string `json:"prefix,omitempty"`

	// Accept lists the parent's namespaces whose pods this cluster takes;
	// a pod of another is refused (it stays Pending at the parent with
	// this reason, or is placed elsewhere). Empty: every namespace of the
	// parent but its system ones (kube-system, kube-public,
	// kube-node-lease, nestlet-system). "*" accepts those too (they
	// still land in no system namespace here: use Mapping Prefixed).
	//
	// +listType=set
	// +optional
	Accept []string `json:"accept,omitempty"`
}

// NamespaceMapping names how a parent namespace is named in the child.
type NamespaceMapping string

// Namespace mappings.
const (
	NamespaceMappingSame     NamespaceMapping = "Same"
	NamespaceMappingPrefixed NamespaceMapping = "Prefixed"
)

// Pod Security levels of TargetSpec.PodSecurity.
const (
	PodSecurityPrivileged = "privileged"
	PodSecurityBaseline   = "baseline"
	PodSecurityRestricted = "restricted"
)

// SecretReference names a Secret.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// TargetStatus is what the agent observed, step by step.
type TargetStatus struct {
	// ObservedGeneration is the generation of the spec last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Joined (this cluster holds a node identity in the
	// parent) and Ready (its virtual node is registered and reporting).
	// Reasons and messages say what is wrong and what to do.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// NodeName is the virtual node in the parent.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// ParentClusterName is the parent's own cluster name, when it publishes
	// one.
	// +optional
	ParentClusterName string `json:"parentClusterName,omitempty"`

	// CertificateExpiry is when the node certificate expires; it is renewed
	// before.
	// +optional
	CertificateExpiry *metav1.Time `json:"certificateExpiry,omitempty"`

	// LastReportTime is when the summary was last sent.
	// +optional
	LastReportTime *metav1.Time `json:"lastReportTime,omitempty"`
}

// TargetList is a list of Targets.
//
// +kubebuilder:object:root=true
type TargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Target `json:"items"`
}

// Condition types.
const (
	ConditionJoined = "Joined"
	ConditionReady  = "Ready"
	// ConditionPodCIDRsDistinct: the pod CIDRs of this cluster's subtree
	// overlap none of the parent's other clusters and nodes (True), or do
	// (False, ReasonPodCIDROverlap): pod IPs, and so Service endpoints,
	// would be ambiguous across the tree.
	ConditionPodCIDRsDistinct = "PodCIDRsDistinct"
	// ConditionPodCIDRsGranted: every pod CIDR of this cluster's subtree
	// is one the parent grants it (True, ReasonPodCIDRsGranted), or some
	// are not (False, ReasonPodCIDRsRefused): those are routed nowhere in
	// the tree; the message names them and what to ask the parent's admin.
	ConditionPodCIDRsGranted = "PodCIDRsGranted"
	// ConditionTunnel is the state of the peer link this cluster's
	// gateway opened to the parent's (the agent's --gateway): pod traffic
	// to the other clusters goes through it. Absent without a gateway.
	// (The name predates the word "peer" for the WireGuard link and is
	// kept for compatibility, as are its reasons.)
	ConditionTunnel = "Tunnel"
	// ConditionCompatible says whether this agent and the parent share a
	// protocol (True, ReasonProtocolsMeet) or not (False,
	// ReasonVersionSkew), naming both builds (api/protocol.go).
	ConditionCompatible = "Compatible"
)

// Condition reasons. Each is documented in docs/troubleshooting.md.
const (
	ReasonJoined            = "Joined"
	ReasonReporting         = "Reporting"
	ReasonJoining           = "Joining"
	ReasonAwaitingApproval  = "AwaitingApproval"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonTokenSecretError  = "TokenSecretError"
	ReasonTokenRejected     = "TokenRejected"
	ReasonParentUnreachable = "ParentUnreachable"
	ReasonCAMismatch        = "CAMismatch"
	ReasonCSRDenied         = "CSRDenied"
	ReasonNameTaken         = "NameTaken"
	ReasonSelfTarget        = "SelfTarget"
	ReasonDuplicateName     = "DuplicateClusterName"
	ReasonNodeError         = "NodeError"
	ReasonChildNotReady     = "ChildNotReady"
	ReasonPodCIDROverlap    = "PodCIDROverlap"
	ReasonPodCIDRsDistinct  = "PodCIDRsDistinct"
	ReasonNoPodCIDRs        = "NoPodCIDRs"
	ReasonPodCIDRsGranted   = "PodCIDRsGranted"
	ReasonPodCIDRsRefused   = "PodCIDRsRefused"
	// Reasons of ConditionTunnel.
	ReasonProtocolsMeet     = "ProtocolsMeet"
	ReasonVersionSkew       = "VersionSkew"
	ReasonTunnelUp          = "TunnelUp"
	ReasonTunnelDown        = "TunnelDown"
	ReasonNoParentGateway   = "NoParentGateway"
	ReasonNoGatewayEndpoint = "NoGatewayEndpoint"
	// ReasonPodCIDRCheckPending: the parent's agent has not written its
	// pod CIDR check on the virtual node yet.
	ReasonPodCIDRCheckPending = "PodCIDRCheckPending"
	// ReasonKubeletAPIUnavailable: the agent was told to serve the kubelet
	// API in a way the parent does not support (tunnel mode without a
	// nestlet-proxy in the parent) or cannot listen.
	ReasonKubeletAPIUnavailable = "KubeletAPIUnavailable"
)

// DefaultReportFrequency applies when spec.reportFrequency is unset.
const DefaultReportFrequency = "10s"
