package scheme_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	kubeschedulerv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	_ "github.com/nestlet/nestlet/scheduler-plugins/apis/config/scheme"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config/validation"
	"github.com/nestlet/nestlet/scheduler-plugins/loopguard"
	"github.com/nestlet/nestlet/scheduler-plugins/profile"
	"github.com/nestlet/nestlet/scheduler-plugins/watermark"
)

const header = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    filter:
      enabled:
      - name: LoopGuard
      - name: Watermark
    score:
      enabled:
      - name: Watermark
`

// load reads raw as the nestlet-scheduler binary does, from a file.
func load(t *testing.T, raw string) (*schedconfig.KubeSchedulerConfiguration, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	require.NoError(t, os.WriteFile(file, []byte(raw), 0o600))
	logger, _ := ktesting.NewTestContext(t)
	return options.LoadConfigFromFile(logger, file)
}

// pluginArgs returns the args of the profile's pluginConfig by plugin name.
func pluginArgs(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration) map[string]runtime.Object {
	t.Helper()
	require.Len(t, cfg.Profiles, 1)
	out := map[string]runtime.Object{}
	for _, c := range cfg.Profiles[0].PluginConfig {
		out[c.Name] = c.Args
	}
	return out
}

// validate checks the Nestlet args of every pluginConfig, as kube-scheduler
// does the in-tree ones.
func validate(cfg *schedconfig.KubeSchedulerConfiguration) field.ErrorList {
	var errs field.ErrorList
	for i, prof := range cfg.Profiles {
		for j, c := range prof.PluginConfig {
			path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
			switch a := c.Args.(type) {
			case *config.WatermarkArgs:
				errs = append(errs, validation.ValidateWatermarkArgs(path, a)...)
			case *config.LoopGuardArgs:
				errs = append(errs, validation.ValidateLoopGuardArgs(path, a)...)
			}
		}
	}
	return errs
}

func TestDecodeDefaults(t *testing.T) {
	defaultWatermark := map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95, corev1.ResourceMemory: 0.95, corev1.ResourcePods: 1}
	tests := []struct {
		name          string
		pluginConfig  string
		wantWatermark *config.WatermarkArgs
		wantLoopGuard *config.LoopGuardArgs
	}{
		{name: "no pluginConfig: default args for the enabled plugins",
			wantWatermark: &config.WatermarkArgs{HighWatermark: defaultWatermark, Mode: config.WatermarkSpread},
			wantLoopGuard: &config.LoopGuardArgs{HopLimit: 8}},
		{name: "empty args", pluginConfig: "  - name: Watermark\n    args: {}\n  - name: LoopGuard\n    args: {}\n",
			wantWatermark: &config.WatermarkArgs{HighWatermark: defaultWatermark, Mode: config.WatermarkSpread},
			wantLoopGuard: &config.LoopGuardArgs{HopLimit: 8}},
		{name: "zero values are unset", pluginConfig: "  - name: Watermark\n    args: {mode: '', highWatermark: {}}\n  - name: LoopGuard\n    args: {hopLimit: 0}\n",
			wantWatermark: &config.WatermarkArgs{HighWatermark: defaultWatermark, Mode: config.WatermarkSpread},
			wantLoopGuard: &config.LoopGuardArgs{HopLimit: 8}},
		{name: "set", pluginConfig: "  - name: Watermark\n    args:\n      mode: pack\n      highWatermark:\n        nvidia.com/gpu: 1\n" +
			"  - name: LoopGuard\n    args:\n      hopLimit: 3\n",
			wantWatermark: &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{"nvidia.com/gpu": 1}, Mode: config.WatermarkPack},
			wantLoopGuard: &config.LoopGuardArgs{HopLimit: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := header
			if tt.pluginConfig != "" {
				raw += "  pluginConfig:\n" + tt.pluginConfig
			}
			cfg, err := load(t, raw)
			require.NoError(t, err)
			require.NoError(t, schedvalidation.ValidateKubeSchedulerConfiguration(cfg))
			require.Empty(t, validate(cfg))
			args := pluginArgs(t, cfg)
			wm, ok := args[watermark.Name].(*config.WatermarkArgs)
			require.True(t, ok, "Watermark args are %T", args[watermark.Name])
			require.Equal(t, tt.wantWatermark.HighWatermark, wm.HighWatermark)
			require.Equal(t, tt.wantWatermark.Mode, wm.Mode)
			lg, ok := args[loopguard.Name].(*config.LoopGuardArgs)
			require.True(t, ok, "LoopGuard args are %T", args[loopguard.Name])
			require.Equal(t, tt.wantLoopGuard.HopLimit, lg.HopLimit)

			p, err := watermark.New(context.Background(), wm, nil)
			require.NoError(t, err)
			require.Equal(t, watermark.Name, p.Name())
			p, err = loopguard.New(context.Background(), lg, nil)
			require.NoError(t, err)
			require.Equal(t, loopguard.Name, p.Name())
		})
	}
}

func TestDecodeInvalid(t *testing.T) {
	tests := []struct {
		name         string
		pluginConfig string
		wantDecode   string   // the decoding error
		wantValidate []string // the validation errors, with the args' path
		wantNew      string   // the plugin's error
	}{
		{name: "watermark above 1", pluginConfig: "  - name: Watermark\n    args:\n      highWatermark:\n        cpu: 1.5\n",
			wantValidate: []string{"profiles[0].pluginConfig[0].args.highWatermark[cpu]: Invalid value: 1.5: must be in (0, 1]"},
			wantNew:      "Watermark args: highWatermark[cpu] must be in (0, 1], got 1.5"},
		{name: "watermark 0 and an unknown mode", pluginConfig: "  - name: Watermark\n    args:\n      mode: random\n      highWatermark:\n        memory: 0\n",
			wantValidate: []string{
				"profiles[0].pluginConfig[0].args.highWatermark[memory]: Invalid value: 0: must be in (0, 1]",
				`profiles[0].pluginConfig[0].args.mode: Invalid value: "random": must be "spread" or "pack"`,
			},
			wantNew: `Watermark args: highWatermark[memory] must be in (0, 1], got 0; mode must be "spread" or "pack", got "random"`},
		{name: "negative hop limit", pluginConfig: "  - name: LoopGuard\n    args:\n      hopLimit: -2\n",
			wantValidate: []string{"profiles[0].pluginConfig[0].args.hopLimit: Invalid value: -2: must be at least 1"},
			wantNew:      "LoopGuard args: hopLimit must be at least 1, got -2"},
		{name: "wrong type", pluginConfig: "  - name: LoopGuard\n    args:\n      hopLimit: eight\n",
			wantDecode: "decoding args for plugin LoopGuard"},
		{name: "unknown field", pluginConfig: "  - name: Watermark\n    args:\n      highWatermarks:\n        cpu: 0.5\n",
			wantDecode: `unknown field "highWatermarks"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(t, header+"  pluginConfig:\n"+tt.pluginConfig)
			if tt.wantDecode != "" {
				require.ErrorContains(t, err, tt.wantDecode)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, e := range validate(cfg) {
				got = append(got, e.Error())
			}
			require.Equal(t, tt.wantValidate, got)

			c := cfg.Profiles[0].PluginConfig[0]
			news := map[string]func(context.Context, runtime.Object) error{
				watermark.Name: func(ctx context.Context, o runtime.Object) error { _, err := watermark.New(ctx, o, nil); return err },
				loopguard.Name: func(ctx context.Context, o runtime.Object) error { _, err := loopguard.New(ctx, o, nil); return err },
			}
			require.EqualError(t, news[c.Name](context.Background(), c.Args), tt.wantNew)
		})
	}
}

// TestShippedProfile decodes the shipped profile through the scheme: the
// args arrive typed, as the file sets them, and the plugins take them.
func TestShippedProfile(t *testing.T) {
	cfg, err := load(t, string(profile.SchedulerConfig()))
	require.NoError(t, err)
	require.NoError(t, schedvalidation.ValidateKubeSchedulerConfiguration(cfg))
	require.Empty(t, validate(cfg))
	args := pluginArgs(t, cfg)
	require.Equal(t, map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95, corev1.ResourceMemory: 0.95, corev1.ResourcePods: 1},
		args[watermark.Name].(*config.WatermarkArgs).HighWatermark)
	require.Equal(t, config.WatermarkSpread, args[watermark.Name].(*config.WatermarkArgs).Mode)
	require.Equal(t, int32(8), args[loopguard.Name].(*config.LoopGuardArgs).HopLimit)
	for name, factory := range map[string]func(context.Context, runtime.Object) error{
		watermark.Name: func(ctx context.Context, o runtime.Object) error { _, err := watermark.New(ctx, o, nil); return err },
		loopguard.Name: func(ctx context.Context, o runtime.Object) error { _, err := loopguard.New(ctx, o, nil); return err },
	} {
		require.NoError(t, factory(context.Background(), args[name]), name)
	}
}

// TestWriteConfig encodes the decoded configuration back as kube-scheduler
// does (--write-config-to): the args convert back to v1 and read the same.
func TestWriteConfig(t *testing.T) {
	cfg, err := load(t, header+"  pluginConfig:\n  - name: Watermark\n    args:\n      mode: pack\n  - name: LoopGuard\n    args:\n      hopLimit: 5\n")
	require.NoError(t, err)
	info, ok := runtime.SerializerInfoForMediaType(kubeschedulerscheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	require.True(t, ok)
	var buf bytes.Buffer
	require.NoError(t, kubeschedulerscheme.Codecs.EncoderForVersion(info.Serializer, kubeschedulerv1.SchemeGroupVersion).Encode(cfg, &buf))
	require.Contains(t, buf.String(), "kind: WatermarkArgs")
	require.Contains(t, buf.String(), "mode: pack")
	require.Contains(t, buf.String(), "hopLimit: 5")

	again, err := load(t, buf.String())
	require.NoError(t, err)
	require.Equal(t, pluginArgs(t, cfg), pluginArgs(t, again))
}
