package child

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
)

// Pod CIDR overlaps are found by the parent (provider/parent/podcidrs.go),
// which alone sees all its nodes, and written on the child's virtual node
// (api.AnnotationPodCIDROverlap), as is what the parent refuses to route of
// them (api.AnnotationPodCIDRsRefused, provider/parent/grants.go): the
// child reads both back from its own node and reports them as
// ConditionPodCIDRsDistinct and ConditionPodCIDRsGranted on its Target.

// checkPodCIDRs writes the pod CIDR conditions again every period (a few
// report periods), until ctx ends: this cluster's own pod CIDRs change without its
// node in the parent (view writes what the parent says as each version of
// the node comes).
func checkPodCIDRs(ctx context.Context, clk clock.WithTicker, view *parentView, every time.Duration) {
	tick := clk.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		view.write(ctx)
	}
}

// podCIDRConditions is what the parent found of own, this cluster's pod
// CIDRs, as it says on n, the virtual node: whether they overlap another
// cluster's, and whether it grants them.
func podCIDRConditions(own []string, n *corev1.Node) []metav1.Condition {
	distinct := podCIDRPending(own)
	if len(own) == 0 {
		return []metav1.Condition{distinct}
	}
	switch found, ok := n.Annotations[api.AnnotationPodCIDROverlap]; {
	case !ok:
	case found == api.PodCIDROverlapNone:
		distinct.Status, distinct.Reason = metav1.ConditionTrue, v1alpha1.ReasonPodCIDRsDistinct
		distinct.Message = fmt.Sprintf("pod CIDRs %s overlap no other node or cluster of the parent", strings.Join(own, ", "))
	default:
		distinct.Status, distinct.Reason = metav1.ConditionFalse, v1alpha1.ReasonPodCIDROverlap
		distinct.Message = fmt.Sprintf("pod CIDRs collide in the parent: %s. Pods in both places may get the same IP, so pod IPs and the endpoints of Services seen from the parent are ambiguous, and the parent routes a colliding range to the cluster that held it first only (condition %s says what it refuses this cluster); give every joined cluster its own pod CIDR (kube-controller-manager --cluster-cidr, or the CNI's IP pool)", found, v1alpha1.ConditionPodCIDRsGranted)
	}
	return []metav1.Condition{distinct, podCIDRsGranted(own, n)}
}

// podCIDRsGranted is ConditionPodCIDRsGranted from what the parent says on
// n of own, this cluster's pod CIDRs.
func podCIDRsGranted(own []string, n *corev1.Node) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ConditionPodCIDRsGranted}
	switch refused, ok := n.Annotations[api.AnnotationPodCIDRsRefused]; {
	case !ok:
		cond.Status, cond.Reason = metav1.ConditionUnknown, v1alpha1.ReasonPodCIDRCheckPending
		cond.Message = fmt.Sprintf("pod CIDRs %s: the parent's Nestlet agent has not said which it grants this cluster yet (or runs a version before grants)", strings.Join(own, ", "))
	case refused == api.PodCIDROverlapNone:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonPodCIDRsGranted
		cond.Message = fmt.Sprintf("the parent grants pod CIDRs %s: it routes them here, carries them up and tells its other clusters", strings.Join(own, ", "))
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonPodCIDRsRefused
		cond.Message = fmt.Sprintf("the parent routes only part of pod CIDRs %s, the rest %s; pods in what is not granted are reachable from no other cluster", strings.Join(own, ", "), refused)
	}
	return cond
}

// podCIDRPending is the pod CIDR condition before the parent has answered:
// pending, or impossible without pod CIDRs.
func podCIDRPending(own []string) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ConditionPodCIDRsDistinct, Status: metav1.ConditionUnknown}
	if len(own) == 0 {
		cond.Reason = v1alpha1.ReasonNoPodCIDRs
		cond.Message = "no node of this cluster's subtree has spec.podCIDR set, so overlaps with the parent's other clusters cannot be checked"
		return cond
	}
	cond.Reason = v1alpha1.ReasonPodCIDRCheckPending
	cond.Message = fmt.Sprintf("pod CIDRs %s: the parent's Nestlet agent has not compared them with its other clusters yet", strings.Join(own, ", "))
	return cond
}
