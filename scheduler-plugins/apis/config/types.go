package config

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WatermarkMode says how the Watermark plugin ranks the nodes below the
// watermark.
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
	metav1.TypeMeta

	// HighWatermark maps a resource to the fraction of a node's
	// allocatable its requests may reach, in (0, 1]. Resources not listed
	// are not watched. Defaults (when empty) to cpu 0.95, memory 0.95,
	// pods 1.
	HighWatermark map[corev1.ResourceName]float64
	// Mode is spread (the default, when empty) or pack.
	Mode WatermarkMode
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LoopGuardArgs are the arguments of the LoopGuard plugin.
type LoopGuardArgs struct {
	metav1.TypeMeta

	// HopLimit is the most times a pod may be forwarded, at least 1.
	// Defaults (when 0) to 8, as the agent's.
	HopLimit int32
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NamespacePolicyArgs are the arguments of the NamespacePolicy plugin.
type NamespacePolicyArgs struct {
	metav1.TypeMeta

	// DefaultClusters is the policy of a namespace without the annotation
	// nestlet.io/clusters (a system namespace's pods stay whatever it
	// says): "" for any child, "none" for none (a namespace must then opt
	// in), or a label selector over the virtual nodes.
	DefaultClusters string
}
