package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// DefaultHighWatermark returns the watermark that applies when
// WatermarkArgs.HighWatermark is unset or empty, a new map on each call.
func DefaultHighWatermark() map[corev1.ResourceName]float64 {
	return map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95, corev1.ResourceMemory: 0.95, corev1.ResourcePods: 1}
}

// SetDefaults_WatermarkArgs fills the unset fields of obj. An empty map or
// mode counts as unset, as it always has.
func SetDefaults_WatermarkArgs(obj *WatermarkArgs) {
	if len(obj.HighWatermark) == 0 {
		obj.HighWatermark = DefaultHighWatermark()
	}
	if obj.Mode == nil || *obj.Mode == "" {
		obj.Mode = ptr.To(WatermarkSpread)
	}
}

// SetDefaults_LoopGuardArgs fills the unset fields of obj. A hop limit of 0
// counts as unset, as it always has.
func SetDefaults_LoopGuardArgs(obj *LoopGuardArgs) {
	if obj.HopLimit == nil || *obj.HopLimit == 0 {
		obj.HopLimit = ptr.To[int32](api.DefaultHopLimit)
	}
}
