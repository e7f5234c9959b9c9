package api

import corev1 "k8s.io/api/core/v1"

// ProviderTaint is the taint every virtual node carries
// (TaintKeyProvider=TaintValueProvider:NoSchedule): the stock scheduler
// keeps pods off unless they tolerate it, and an agent forwards only pods
// that tolerate it or come from a trusted scheduler.
func ProviderTaint() corev1.Taint {
	return corev1.Taint{Key: TaintKeyProvider, Value: TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}
}

// ChildTaintEffects are the effects a parent may give its children's
// provider taint: NoSchedule (the default: the stock scheduler keeps
// ordinary pods off), or PreferNoSchedule, for a cluster made only of
// clusters whose default scheduler is Nestlet's: its nodes then take pods
// as one cluster's do, to users and to the checks of tests such as
// Kubernetes conformance ("ready, schedulable nodes").
var ChildTaintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule}
