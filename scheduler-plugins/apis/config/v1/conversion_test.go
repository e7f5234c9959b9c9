package v1

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
)

func TestConversion(t *testing.T) {
	tests := []struct {
		name     string
		v1       runtime.Object
		internal runtime.Object
		// back is v1 as it converts back from internal, when it differs.
		back runtime.Object
	}{
		{name: "watermark",
			v1:       &WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.5}, Mode: ptr.To(WatermarkPack)},
			internal: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.5}, Mode: config.WatermarkPack}},
		{name: "watermark unset", v1: &WatermarkArgs{}, internal: &config.WatermarkArgs{},
			back: &WatermarkArgs{Mode: ptr.To[WatermarkMode]("")}},
		{name: "loop guard", v1: &LoopGuardArgs{HopLimit: ptr.To[int32](3)}, internal: &config.LoopGuardArgs{HopLimit: 3}},
		{name: "loop guard unset", v1: &LoopGuardArgs{}, internal: &config.LoopGuardArgs{},
			back: &LoopGuardArgs{HopLimit: ptr.To[int32](0)}},
	}
	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))
	require.NoError(t, config.AddToScheme(s))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			internal, err := s.ConvertToVersion(tt.v1, config.SchemeGroupVersion)
			require.NoError(t, err)
			internal.GetObjectKind().SetGroupVersionKind(tt.internal.GetObjectKind().GroupVersionKind())
			require.Equal(t, tt.internal, internal)

			back, err := s.ConvertToVersion(tt.internal, SchemeGroupVersion)
			require.NoError(t, err)
			want := tt.back
			if want == nil {
				want = tt.v1
			}
			back.GetObjectKind().SetGroupVersionKind(want.GetObjectKind().GroupVersionKind())
			require.Equal(t, want, back)
		})
	}
}
