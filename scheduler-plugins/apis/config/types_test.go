package config

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestDeepCopyObject checks that the generated copies share nothing, so
// that a profile built in Go may pass its args to New as they are.
func TestDeepCopyObject(t *testing.T) {
	tests := []struct {
		name   string
		args   runtime.Object
		mutate func(runtime.Object)
		// wantNil: a nil pointer copies as a nil object.
		wantNil bool
	}{
		{name: "nil watermark", args: (*WatermarkArgs)(nil), wantNil: true},
		{name: "empty watermark", args: &WatermarkArgs{}},
		{name: "watermark", args: &WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.5}, Mode: WatermarkPack},
			mutate: func(o runtime.Object) { o.(*WatermarkArgs).HighWatermark[corev1.ResourceCPU] = 0.9 }},
		{name: "nil loop guard", args: (*LoopGuardArgs)(nil), wantNil: true},
		{name: "loop guard", args: &LoopGuardArgs{HopLimit: 3},
			mutate: func(o runtime.Object) { o.(*LoopGuardArgs).HopLimit = 4 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := tt.args.DeepCopyObject()
			if tt.wantNil {
				require.Nil(t, cp)
				return
			}
			orig := tt.args.DeepCopyObject()
			require.Equal(t, tt.args, cp)
			if tt.mutate == nil {
				return
			}
			require.NotSame(t, tt.args, cp)
			tt.mutate(cp)
			require.Equal(t, orig, tt.args)
			require.NotEqual(t, tt.args, cp)
		})
	}
}

// TestAddToScheme checks that each plugin's args are registered under the
// kind kube-scheduler looks up for its pluginConfig entry.
func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))
	for kind, obj := range map[string]runtime.Object{"WatermarkArgs": &WatermarkArgs{}, "LoopGuardArgs": &LoopGuardArgs{}} {
		gvks, _, err := s.ObjectKinds(obj)
		require.NoError(t, err)
		require.Equal(t, SchemeGroupVersion.WithKind(kind), gvks[0])
	}
	require.Equal(t, "kubescheduler.config.k8s.io", SchemeGroupVersion.Group)
	require.Equal(t, runtime.APIVersionInternal, SchemeGroupVersion.Version)
}
