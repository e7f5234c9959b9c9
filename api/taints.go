package api

import corev1 "k8s.io/api/core/v1"

// ProviderTaint is the taint every virtual node carries
// (TaintKeyProvider=TaintValueProvider:NoSchedule): the stock scheduler
// keeps pods off unless they tolerate it, and an agent forwards only pods
// that tolerate it or come from a trusted scheduler.
func ProviderTaint() corev1.Taint {
	return corev1.Taint{Key: TaintKeyProvider, Value: TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}
}
