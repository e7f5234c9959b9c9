package watermark

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Mode says how nodes below the watermark are ranked.
type Mode string

const (
	// Spread prefers the node whose projected water level is lowest.
	Spread Mode = "spread"
	// Pack prefers the fullest node that stays below the watermark.
	Pack Mode = "pack"
)

// Args of Watermark.
type Args struct {
	metav1.TypeMeta `json:",inline"`
	// HighWatermark maps a resource to the fraction of a node's
	// allocatable its requests may reach, in (0, 1]. Resources not listed
	// are not watched. Default: cpu 0.95, memory 0.95, pods 1.
	HighWatermark map[corev1.ResourceName]float64 `json:"highWatermark,omitempty"`
	// Mode is spread (default) or pack.
	Mode Mode `json:"mode,omitempty"`
}

var _ runtime.Object = &Args{}

// DeepCopyObject makes *Args a runtime.Object, so that a profile built in
// Go may pass it to New as is.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	out := *a
	out.HighWatermark = maps.Clone(a.HighWatermark)
	return &out
}

// DefaultHighWatermark applies when Args.HighWatermark is empty.
func DefaultHighWatermark() map[corev1.ResourceName]float64 {
	return map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95, corev1.ResourceMemory: 0.95, corev1.ResourcePods: 1}
}

// SetDefaults fills unset fields.
func (a *Args) SetDefaults() {
	if len(a.HighWatermark) == 0 {
		a.HighWatermark = DefaultHighWatermark()
	} else {
		a.HighWatermark = maps.Clone(a.HighWatermark)
	}
	if a.Mode == "" {
		a.Mode = Spread
	}
}

// Validate checks defaulted args.
func (a *Args) Validate() error {
	for r, f := range a.HighWatermark {
		if f <= 0 || f > 1 {
			return fmt.Errorf("highWatermark[%s] must be in (0, 1], got %v", r, f)
		}
	}
	if a.Mode != Spread && a.Mode != Pack {
		return fmt.Errorf("mode must be %q or %q, got %q", Spread, Pack, a.Mode)
	}
	return nil
}
