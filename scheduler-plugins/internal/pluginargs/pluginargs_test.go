package pluginargs

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	configv1 "github.com/nestlet/nestlet/scheduler-plugins/apis/config/v1"
)

func TestDecode(t *testing.T) {
	defaults := configv1.DefaultHighWatermark()
	tests := []struct {
		name    string
		obj     runtime.Object
		want    config.WatermarkArgs
		wantErr string
	}{
		{name: "nil", obj: nil, want: config.WatermarkArgs{HighWatermark: defaults, Mode: config.WatermarkSpread}},
		{name: "nil internal", obj: (*config.WatermarkArgs)(nil), want: config.WatermarkArgs{HighWatermark: defaults, Mode: config.WatermarkSpread}},
		{name: "nil v1", obj: (*configv1.WatermarkArgs)(nil), want: config.WatermarkArgs{HighWatermark: defaults, Mode: config.WatermarkSpread}},
		{name: "internal", obj: &config.WatermarkArgs{Mode: config.WatermarkPack},
			want: config.WatermarkArgs{HighWatermark: defaults, Mode: config.WatermarkPack}},
		{name: "internal as kube-scheduler passes it", obj: &config.WatermarkArgs{TypeMeta: metav1.TypeMeta{APIVersion: "kubescheduler.config.k8s.io/__internal", Kind: "WatermarkArgs"}, HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.5}},
			want: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.5}, Mode: config.WatermarkSpread}},
		{name: "v1", obj: &configv1.WatermarkArgs{Mode: ptr.To(configv1.WatermarkPack), HighWatermark: map[corev1.ResourceName]float64{corev1.ResourcePods: 1}},
			want: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourcePods: 1}, Mode: config.WatermarkPack}},
		{name: "raw YAML", obj: &runtime.Unknown{Raw: []byte("mode: pack\n"), ContentType: runtime.ContentTypeYAML},
			want: config.WatermarkArgs{HighWatermark: defaults, Mode: config.WatermarkPack}},
		{name: "raw JSON, invalid values kept", obj: &runtime.Unknown{Raw: []byte(`{"mode":"random","highWatermark":{"cpu":2}}`)},
			want: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 2}, Mode: "random"}},
		{name: "malformed", obj: &runtime.Unknown{Raw: []byte(`{`)}, wantErr: "unexpected end of JSON input"},
		{name: "another plugin's args", obj: &config.LoopGuardArgs{}, wantErr: "want args of type WatermarkArgs, got *config.LoopGuardArgs"},
		{name: "foreign", obj: &corev1.Pod{}, wantErr: "want args of type WatermarkArgs, got *v1.Pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before runtime.Object
			if tt.obj != nil {
				before = tt.obj.DeepCopyObject()
			}
			got := &config.WatermarkArgs{}
			err := Decode(tt.obj, got)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, *got)
			// obj is left as it was, and shares nothing with the result.
			got.HighWatermark["x"] = 1
			if before != nil {
				require.Equal(t, before, tt.obj)
			}
		})
	}
}

func TestDecodeLoopGuard(t *testing.T) {
	for _, tt := range []struct {
		obj  runtime.Object
		want int32
	}{
		{obj: nil, want: 8},
		{obj: &config.LoopGuardArgs{}, want: 8},
		{obj: &config.LoopGuardArgs{HopLimit: 2}, want: 2},
		{obj: &configv1.LoopGuardArgs{HopLimit: ptr.To[int32](0)}, want: 8},
		{obj: &runtime.Unknown{Raw: []byte(`{"hopLimit":-1}`)}, want: -1},
	} {
		got := &config.LoopGuardArgs{}
		require.NoError(t, Decode(tt.obj, got))
		require.Equal(t, config.LoopGuardArgs{HopLimit: tt.want}, *got)
	}
	require.ErrorContains(t, Decode(nil, &corev1.Pod{}), "no kind is registered")
}

func TestValidationError(t *testing.T) {
	require.NoError(t, ValidationError(nil))
	err := ValidationError(field.ErrorList{
		field.Invalid(field.NewPath("highWatermark").Key("cpu"), 1.5, "must be in (0, 1]"),
		field.Invalid(field.NewPath("mode"), config.WatermarkMode("random"), `must be "spread" or "pack"`),
		field.Invalid(field.NewPath("hopLimit"), int32(-1), "must be at least 1"),
	})
	require.EqualError(t, err, `highWatermark[cpu] must be in (0, 1], got 1.5; mode must be "spread" or "pack", got "random"; hopLimit must be at least 1, got -1`)
}
