package watermark

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestSetDefaults(t *testing.T) {
	tests := []struct {
		name string
		args Args
		want Args
	}{
		{
			name: "empty",
			args: Args{},
			want: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95, corev1.ResourceMemory: 0.95, corev1.ResourcePods: 1}, Mode: Spread},
		},
		{
			name: "empty map",
			args: Args{HighWatermark: map[corev1.ResourceName]float64{}, Mode: Pack},
			want: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95, corev1.ResourceMemory: 0.95, corev1.ResourcePods: 1}, Mode: Pack},
		},
		{
			name: "only the listed resources are watched",
			args: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.8}},
			want: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.8}, Mode: Spread},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.args.HighWatermark
			got := tt.args
			got.SetDefaults()
			require.Equal(t, tt.want, got)
			require.NoError(t, got.Validate())
			// The defaulted map is the plugin's own.
			got.HighWatermark[corev1.ResourceCPU] = 0.1
			if in != nil {
				require.NotEqual(t, 0.1, in[corev1.ResourceCPU])
			}
			require.Equal(t, 0.95, DefaultHighWatermark()[corev1.ResourceCPU])
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    Args
		wantErr string
	}{
		{name: "defaults", args: Args{HighWatermark: DefaultHighWatermark(), Mode: Spread}},
		{name: "pack", args: Args{HighWatermark: DefaultHighWatermark(), Mode: Pack}},
		{name: "watermark 1", args: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 1}, Mode: Spread}},
		{name: "small watermark", args: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.01}, Mode: Spread}},
		{name: "watermark 0", args: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0}, Mode: Spread},
			wantErr: "highWatermark[cpu] must be in (0, 1], got 0"},
		{name: "negative watermark", args: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceMemory: -0.5}, Mode: Spread},
			wantErr: "highWatermark[memory] must be in (0, 1]"},
		{name: "watermark 1.5", args: Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourcePods: 1.5}, Mode: Spread},
			wantErr: "highWatermark[pods] must be in (0, 1], got 1.5"},
		{name: "mode random", args: Args{HighWatermark: DefaultHighWatermark(), Mode: "random"},
			wantErr: `mode must be "spread" or "pack", got "random"`},
		{name: "mode not defaulted", args: Args{HighWatermark: DefaultHighWatermark()}, wantErr: "mode must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.args.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestDeepCopyObject(t *testing.T) {
	tests := []struct {
		name string
		args *Args
	}{
		{name: "nil", args: nil},
		{name: "empty", args: &Args{}},
		{name: "set", args: &Args{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.5}, Mode: Pack}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.args.DeepCopyObject()
			if tt.args == nil {
				require.Nil(t, obj)
				return
			}
			cp := obj.(*Args)
			require.Equal(t, tt.args, cp)
			if cp.HighWatermark != nil {
				cp.HighWatermark[corev1.ResourceCPU] = 0.9
				require.Equal(t, 0.5, tt.args.HighWatermark[corev1.ResourceCPU])
			}
		})
	}
}
