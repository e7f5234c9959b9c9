package v1

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestSetDefaultsWatermarkArgs(t *testing.T) {
	defaults := map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95, corev1.ResourceMemory: 0.95, corev1.ResourcePods: 1}
	tests := []struct {
		name string
		args WatermarkArgs
		want WatermarkArgs
	}{
		{name: "empty", args: WatermarkArgs{},
			want: WatermarkArgs{HighWatermark: defaults, Mode: ptr.To(WatermarkSpread)}},
		{name: "empty map and mode", args: WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{}, Mode: ptr.To[WatermarkMode]("")},
			want: WatermarkArgs{HighWatermark: defaults, Mode: ptr.To(WatermarkSpread)}},
		{name: "pack", args: WatermarkArgs{Mode: ptr.To(WatermarkPack)},
			want: WatermarkArgs{HighWatermark: defaults, Mode: ptr.To(WatermarkPack)}},
		{name: "only the listed resources are watched", args: WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.8}},
			want: WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.8}, Mode: ptr.To(WatermarkSpread)}},
		{name: "invalid values are left for validation", args: WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 2}, Mode: ptr.To[WatermarkMode]("random")},
			want: WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 2}, Mode: ptr.To[WatermarkMode]("random")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.args
			SetDefaults_WatermarkArgs(&got)
			require.Equal(t, tt.want, got)
			// Through a scheme too, as kube-scheduler defaults them.
			viaScheme := tt.args.DeepCopy()
			newScheme(t).Default(viaScheme)
			require.Equal(t, &tt.want, viaScheme)
			// The default map is new each time.
			got.HighWatermark[corev1.ResourceCPU] = 0.1
			require.Equal(t, 0.95, DefaultHighWatermark()[corev1.ResourceCPU])
		})
	}
}

func TestSetDefaultsLoopGuardArgs(t *testing.T) {
	tests := []struct {
		name string
		args LoopGuardArgs
		want int32
	}{
		{name: "unset", args: LoopGuardArgs{}, want: 8},
		{name: "0", args: LoopGuardArgs{HopLimit: ptr.To[int32](0)}, want: 8},
		{name: "set", args: LoopGuardArgs{HopLimit: ptr.To[int32](3)}, want: 3},
		{name: "invalid values are left for validation", args: LoopGuardArgs{HopLimit: ptr.To[int32](-1)}, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.args
			SetDefaults_LoopGuardArgs(&got)
			require.Equal(t, LoopGuardArgs{HopLimit: ptr.To(tt.want)}, got)
			viaScheme := tt.args.DeepCopy()
			newScheme(t).Default(viaScheme)
			require.Equal(t, &got, viaScheme)
		})
	}
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))
	return s
}
