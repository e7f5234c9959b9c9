package forward

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// A delegate that stays Unschedulable in this cluster past BounceTimeout
// bounces back: the parent pod fails with this cluster's reason and the
// parent avoids this virtual node for the pod's owner for a while.

// unschedulable reports whether d has been refused by this cluster's
// scheduler, since when, and why.
func unschedulable(d *corev1.Pod) (time.Time, string, bool) {
	if d.Spec.NodeName != "" || d.Annotations[api.AnnotationReservedOn] != "" {
		// Bound, or held at a node by this cluster's scheduler (a
		// reservation, reserve.go): a PodScheduled=False condition left
		// from before is not its state.
		return time.Time{}, "", false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.LastTransitionTime.Time, c.Message, true
		}
	}
	return time.Time{}, "", false
}

// scheduleBounce fails the parent pod once d has been unschedulable for
// BounceTimeout (now, or when a timer fires).
func (p *Provider) scheduleBounce(uid types.UID, d *corev1.Pod, since time.Time, msg string) {
	if at := p.held.released.get(uid); at.After(since) {
		// A released reservation that lost its place: counted from the
		// release, not from when it waited for room before.
		since = at
	}
	remaining := p.cfg.BounceTimeout - p.cfg.Clock.Since(since)
	if remaining <= 0 {
		p.bounce(uid, d, msg)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.timers[uid]; ok {
		return
	}
	ns, name := d.Namespace, d.Name
	p.timers[uid] = p.cfg.Clock.AfterFunc(remaining, func() {
		p.mu.Lock()
		delete(p.timers, uid)
		p.mu.Unlock()
		cur, err := p.lister.Pods(ns).Get(name)
		if err != nil {
			return
		}
		if _, msg, stuck := unschedulable(cur); stuck {
			p.bounce(uid, cur, msg)
		}
	})
}

func (p *Provider) cancelBounce(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.timers[uid]; ok {
		t.Stop()
		delete(p.timers, uid)
	}
}

// bounce removes a delegate this cluster cannot place, fails the parent pod
// with this cluster's scheduler's reason, and asks the parent to avoid this
// virtual node for the pod's owner for a while.
func (p *Provider) bounce(uid types.UID, d *corev1.Pod, msg string) {
	parent := p.parentOf(d)
	if parent == nil || parent.UID != uid {
		return
	}
	p.fail(parent, d, api.ReasonBounced, fmt.Sprintf("cluster %s could not place the pod within %s: %s", p.cfg.ClusterName, p.cfg.BounceTimeout, msg))
	err := p.cfg.Child.CoreV1().Pods(d.Namespace).Delete(p.ctx, d.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(p.ctx).Error(err, "Deleting bounced delegate", "pod", klog.KObj(d))
	}
	if owner := api.PodOwnerUID(parent); owner != "" && p.cfg.Avoider != nil {
		p.cfg.Avoider.Avoid(owner, p.cfg.Clock.Now().Add(p.cfg.Cooldown))
	}
}
