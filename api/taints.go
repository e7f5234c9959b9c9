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

// TakesDaemonSets reports whether a virtual node with taints takes
// DaemonSets' pods: only where its parent relaxed the provider taint to
// PreferNoSchedule (a cluster made only of clusters, whose nodes take pods
// as one cluster's do), where a DaemonSet runs one pod per child cluster.
// Under NoSchedule, the default, each cluster runs its own DaemonSets and
// none of its parent's: one tolerating every taint (a CNI, kube-proxy)
// would otherwise run once per child on top of the children's own.
func TakesDaemonSets(taints []corev1.Taint) bool {
	relaxed := false
	for _, t := range taints {
		if t.Key != TaintKeyProvider {
			continue
		}
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			return false
		}
		relaxed = true
	}
	return relaxed
}
