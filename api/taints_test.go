package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// A virtual node takes DaemonSets' pods only with its provider taint
// relaxed to PreferNoSchedule, and never while the taint also holds a
// stronger effect.
func TestTakesDaemonSets(t *testing.T) {
	taint := func(e corev1.TaintEffect) corev1.Taint {
		return corev1.Taint{Key: TaintKeyProvider, Value: TaintValueProvider, Effect: e}
	}
	other := corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}
	assert.False(t, TakesDaemonSets(nil), "not a virtual node's")
	assert.False(t, TakesDaemonSets([]corev1.Taint{ProviderTaint()}))
	assert.True(t, TakesDaemonSets([]corev1.Taint{taint(corev1.TaintEffectPreferNoSchedule)}))
	assert.True(t, TakesDaemonSets([]corev1.Taint{other, taint(corev1.TaintEffectPreferNoSchedule)}), "other taints are the DaemonSet's to tolerate")
	assert.False(t, TakesDaemonSets([]corev1.Taint{taint(corev1.TaintEffectPreferNoSchedule), taint(corev1.TaintEffectNoExecute)}))
}
