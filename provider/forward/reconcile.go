package forward

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// parentUpdated is the handler of updates of the parent pods bound to the
// virtual node. When someone else changed a parent pod's status so that it
// no longer says what its delegate says, the delegate's status is sent up
// again, as a kubelet's status manager puts back its own view of a pod.
// The case it is for: the parent's node lifecycle controller marks every
// pod of a node whose lease lapsed NotReady (this cluster's API server was
// restarted, say); once the node is back, nothing else would make them
// Ready again while their delegates do not change, since virtual-kubelet
// writes a status only when the provider reports a new one. Run subscribes
// it to Config.ParentPodEvents: the one way parent pod updates come in
// besides virtual-kubelet's own pod controller.
func (p *Provider) parentUpdated(oldObj, newObj any) {
	old, ok := oldObj.(*corev1.Pod)
	if !ok {
		return
	}
	cur, ok := newObj.(*corev1.Pod)
	if !ok || sameStatus(old.Status, cur.Status) || cur.DeletionTimestamp != nil || terminal(cur) {
		return
	}
	p.mu.Lock()
	_, failed := p.failed[cur.UID]
	deleting := p.deleting[cur.UID]
	p.mu.Unlock()
	if failed || deleting {
		return
	}
	d := p.delegateOf(cur.Namespace, cur.Name, cur.UID)
	if d == nil || d.DeletionTimestamp != nil {
		return
	}
	up := asParent(cur, d)
	if !drifted(cur.Status, up.Status) {
		return
	}
	// Conditions only the parent has (DisruptionTarget, set before an
	// eviction) are kept, as a kubelet keeps the conditions it does not own.
	for _, c := range cur.Status.Conditions {
		if i, _ := podutil.GetPodConditionFromList(up.Status.Conditions, c.Type); i < 0 {
			up.Status.Conditions = append(up.Status.Conditions, c)
		}
	}
	klog.FromContext(p.ctx).V(2).Info("A parent pod's status was changed by someone else; sending its delegate's again",
		"pod", klog.KObj(cur), "phase", cur.Status.Phase, "ready", conditionStatus(cur.Status, corev1.PodReady))
	p.send(up)
}

// drifted reports whether the parent's status differs from the delegate's
// in what others change: the phase, and the Ready and ContainersReady
// conditions.
func drifted(parent, delegate corev1.PodStatus) bool {
	return parent.Phase != delegate.Phase ||
		conditionStatus(parent, corev1.PodReady) != conditionStatus(delegate, corev1.PodReady) ||
		conditionStatus(parent, corev1.ContainersReady) != conditionStatus(delegate, corev1.ContainersReady)
}

func conditionStatus(st corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
	if _, c := podutil.GetPodConditionFromList(st.Conditions, t); c != nil {
		return c.Status
	}
	return ""
}
