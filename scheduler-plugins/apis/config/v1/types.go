package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WatermarkMode says how the Watermark plugin ranks the nodes below the
// watermark: spread or pack.
type WatermarkMode string

const (
	// WatermarkSpread prefers the node whose projected water level is
	// lowest.
	WatermarkSpread WatermarkMode = "spread"
	// WatermarkPack prefers the fullest node that stays below the
	// watermark.
	WatermarkPack WatermarkMode = "pack"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// WatermarkArgs are the arguments of the Watermark plugin.
type WatermarkArgs struct {
	metav1.TypeMeta `json:",inline"`

	// HighWatermark maps a resource to the fraction of a node's
	// allocatable its requests may reach, in (0, 1]. Resources not listed
	// are not watched. Default (unset or empty): cpu 0.95, memory 0.95,
	// pods 1.
	HighWatermark map[corev1.ResourceName]float64 `json:"highWatermark,omitempty"`
	// Mode is spread or pack. Default (unset or empty): spread.
	Mode *WatermarkMode `json:"mode,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LoopGuardArgs are the arguments of the LoopGuard plugin.
type LoopGuardArgs struct {
	metav1.TypeMeta `json:",inline"`

	// HopLimit is the most times a pod may be forwarded, at least 1; keep
	// it equal to the agent's. Default (unset or 0): 8.
	HopLimit *int32 `json:"hopLimit,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NamespacePolicyArgs are the arguments of the NamespacePolicy plugin.
type NamespacePolicyArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultClusters is the policy of a namespace without the annotation
	// nestlet.io/clusters (a system namespace's pods stay whatever it
	// says): unset or "" for any child, "none" for none (a namespace must
	// then opt in with the annotation), or a label selector over the
	// virtual nodes.
	DefaultClusters string `json:"defaultClusters,omitempty"`
}
