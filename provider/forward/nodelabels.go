package forward

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// dropParentOnlyLabels drops from the delegate the node requirements that
// are about this cluster's virtual node in the parent rather than its
// nodes: a label someone set on the virtual node there (`kubectl label
// node east team=blue`, then a pod selecting team=blue), whose key no node
// of this cluster carries. The parent's scheduler judged those against the
// virtual node, which holds them; kept, they would fit no node here, as a
// pin by name would (unpinVirtualNode). labels is the virtual node's labels
// in the parent (nil: not seen yet, nothing dropped); carried reports
// whether some node here, or a child's subtree by its summary, has key.
func dropParentOnlyLabels(d *corev1.Pod, labels map[string]string, carried func(key string) bool) {
	if len(labels) == 0 || carried == nil {
		return
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	parentOnly := func(r corev1.NodeSelectorRequirement) bool {
		if _, on := labels[r.Key]; !on || carried(r.Key) {
			return false
		}
		sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{r}}}})
		return err == nil && sel.Match(node)
	}
	dropNodeRequirements(d, func(r corev1.NodeSelectorRequirement, field bool) bool { return !field && parentOnly(r) })
}

// dropNodeRequirements removes from d's nodeSelector (each entry as the
// requirement key In [value]) and from the terms of its required node
// affinity (field: a matchFields one) the requirements drop says the
// virtual node itself meets. A term left empty was met by those alone, and
// so is the pod's required affinity (terms are ORed): it goes.
func dropNodeRequirements(d *corev1.Pod, drop func(r corev1.NodeSelectorRequirement, field bool) bool) {
	for _, k := range slices.Sorted(maps.Keys(d.Spec.NodeSelector)) {
		if drop(corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{d.Spec.NodeSelector[k]}}, false) {
			delete(d.Spec.NodeSelector, k)
		}
	}
	if len(d.Spec.NodeSelector) == 0 {
		d.Spec.NodeSelector = nil
	}
	aff := d.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		before := len(terms[i].MatchExpressions) + len(terms[i].MatchFields)
		terms[i].MatchExpressions = slices.DeleteFunc(terms[i].MatchExpressions, func(r corev1.NodeSelectorRequirement) bool { return drop(r, false) })
		terms[i].MatchFields = slices.DeleteFunc(terms[i].MatchFields, func(r corev1.NodeSelectorRequirement) bool { return drop(r, true) })
		if before > 0 && len(terms[i].MatchExpressions)+len(terms[i].MatchFields) == 0 {
			aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
			return
		}
	}
}
