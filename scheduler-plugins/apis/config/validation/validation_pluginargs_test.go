package validation

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
)

// errorStrings renders errs for comparison.
func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateWatermarkArgs(t *testing.T) {
	defaults := map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95, corev1.ResourceMemory: 0.95, corev1.ResourcePods: 1}
	tests := []struct {
		name string
		args config.WatermarkArgs
		want []string
	}{
		{name: "defaults", args: config.WatermarkArgs{HighWatermark: defaults, Mode: config.WatermarkSpread}},
		{name: "pack", args: config.WatermarkArgs{HighWatermark: defaults, Mode: config.WatermarkPack}},
		{name: "no resource watched", args: config.WatermarkArgs{Mode: config.WatermarkSpread}},
		{name: "watermark 1", args: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 1}, Mode: config.WatermarkSpread}},
		{name: "small watermark", args: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.01}, Mode: config.WatermarkSpread}},
		{name: "watermark 0", args: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0}, Mode: config.WatermarkSpread},
			want: []string{"args.highWatermark[cpu]: Invalid value: 0: must be in (0, 1]"}},
		{name: "negative watermark", args: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceMemory: -0.5}, Mode: config.WatermarkSpread},
			want: []string{"args.highWatermark[memory]: Invalid value: -0.5: must be in (0, 1]"}},
		{name: "watermark 1.5", args: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourcePods: 1.5}, Mode: config.WatermarkSpread},
			want: []string{"args.highWatermark[pods]: Invalid value: 1.5: must be in (0, 1]"}},
		{name: "watermark NaN", args: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: math.NaN()}, Mode: config.WatermarkSpread},
			want: []string{"args.highWatermark[cpu]: Invalid value: NaN: must be in (0, 1]"}},
		{name: "mode random", args: config.WatermarkArgs{HighWatermark: defaults, Mode: "random"},
			want: []string{`args.mode: Invalid value: "random": must be "spread" or "pack"`}},
		{name: "mode not defaulted", args: config.WatermarkArgs{HighWatermark: defaults},
			want: []string{`args.mode: Invalid value: "": must be "spread" or "pack"`}},
		{name: "every error, resources in order",
			args: config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourcePods: 2, corev1.ResourceCPU: 0, corev1.ResourceMemory: 0.5}, Mode: "Spread"},
			want: []string{
				"args.highWatermark[cpu]: Invalid value: 0: must be in (0, 1]",
				"args.highWatermark[pods]: Invalid value: 2: must be in (0, 1]",
				`args.mode: Invalid value: "Spread": must be "spread" or "pack"`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, errorStrings(ValidateWatermarkArgs(field.NewPath("args"), &tt.args)))
		})
	}
}

func TestValidateLoopGuardArgs(t *testing.T) {
	tests := []struct {
		name string
		args config.LoopGuardArgs
		want []string
	}{
		{name: "default", args: config.LoopGuardArgs{HopLimit: 8}},
		{name: "1", args: config.LoopGuardArgs{HopLimit: 1}},
		{name: "large", args: config.LoopGuardArgs{HopLimit: math.MaxInt32}},
		{name: "not defaulted", args: config.LoopGuardArgs{}, want: []string{"args.hopLimit: Invalid value: 0: must be at least 1"}},
		{name: "negative", args: config.LoopGuardArgs{HopLimit: -1}, want: []string{"args.hopLimit: Invalid value: -1: must be at least 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, errorStrings(ValidateLoopGuardArgs(field.NewPath("args"), &tt.args)))
		})
	}
}

// TestNilPath checks the paths New reports: relative to the args.
func TestNilPath(t *testing.T) {
	errs := ValidateWatermarkArgs(nil, &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 2}, Mode: config.WatermarkPack})
	require.Equal(t, []string{"highWatermark[cpu]: Invalid value: 2: must be in (0, 1]"}, errorStrings(errs))
	errs = ValidateLoopGuardArgs(nil, &config.LoopGuardArgs{HopLimit: -3})
	require.Equal(t, []string{"hopLimit: Invalid value: -3: must be at least 1"}, errorStrings(errs))
}
