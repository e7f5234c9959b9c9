package forward

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// parentKey returns the namespace and name of a delegate's parent pod.
func parentKey(d *corev1.Pod) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(d.Annotations[api.AnnotationParentPod], "/")
	return namespace, name, ok && name != ""
}

// originUID returns the parent pod UID recorded on a delegate.
func originUID(d *corev1.Pod) types.UID {
	o := d.Annotations[api.AnnotationOrigin]
	return types.UID(o[strings.LastIndex(o, "/")+1:])
}

// asParent returns the parent pod with the delegate's status. With parent
// nil (the parent pod is gone) it returns a stand-in carrying the parent's
// namespace, name and UID.
func asParent(parent, d *corev1.Pod) *corev1.Pod {
	if parent == nil {
		ns, name, _ := parentKey(d)
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: originUID(d)},
			Status:     *d.Status.DeepCopy(),
		}
	}
	out := parent.DeepCopy()
	out.Status = translateStatus(parent, d)
	return out
}

// translateStatus is the delegate's status as the parent pod's: phase,
// conditions, container statuses, IPs, start time. The parent keeps its own
// scheduling condition (it is bound to the virtual node), the conditions
// others set on it there that the delegate has not (DisruptionTarget from
// an eviction at the parent, which a Job's pod failure policy reads), and
// its QoS class.
// kubeletConditions are the pod conditions a kubelet sets and takes off:
// the parent pod has them as its delegate has them (a resize's, once done,
// go), where a condition another writer set at the parent (DisruptionTarget
// from an eviction there) stays.
var kubeletConditions = map[corev1.PodConditionType]bool{
	corev1.PodReady: true, corev1.ContainersReady: true, corev1.PodInitialized: true, corev1.PodReadyToStartContainers: true,
	corev1.PodResizePending: true, corev1.PodResizeInProgress: true,
}

func translateStatus(parent, d *corev1.Pod) corev1.PodStatus {
	st := *d.Status.DeepCopy()
	st.QOSClass = parent.Status.QOSClass
	st.NominatedNodeName = ""
	below := map[corev1.PodConditionType]bool{}
	conds := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != corev1.PodScheduled {
			conds = append(conds, c)
			below[c.Type] = true
		}
	}
	st.Conditions = conds
	observedGenerations(&st, parent, d)
	for _, c := range parent.Status.Conditions {
		if c.Type == corev1.PodScheduled || (!below[c.Type] && !kubeletConditions[c.Type]) {
			st.Conditions = append(st.Conditions, c)
		}
	}
	if st.Phase == "" {
		st.Phase = corev1.PodPending
	}
	return st
}

// observedGenerations says which of the parent pod's generations the
// status reflects: its latest once the delegate carries every change of the
// parent pod and the kubelet below has observed the delegate's latest; the
// parent's own until then (the delegate's generations count other writes).
func observedGenerations(st *corev1.PodStatus, parent, d *corev1.Pod) {
	inStep := d.Generation > 0 && st.ObservedGeneration == d.Generation && !delegateBehind(parent, d)
	mapped := func(observed, parentOwn int64) int64 {
		if observed == 0 {
			return 0
		}
		if inStep && observed == d.Generation {
			return parent.Generation
		}
		return parentOwn
	}
	st.ObservedGeneration = mapped(st.ObservedGeneration, parent.Status.ObservedGeneration)
	for i := range st.Conditions { // the delegate's; the parent's own are added after
		c := &st.Conditions[i]
		var own int64
		for _, pc := range parent.Status.Conditions {
			if pc.Type == c.Type {
				own = pc.ObservedGeneration
			}
		}
		c.ObservedGeneration = mapped(c.ObservedGeneration, own)
	}
}

// terminalStatus is the final status of a parent pod whose delegate was
// deleted on request (d nil: the pod had no delegate that ran): every
// container terminated. A container whose end the delegate's last status
// does not show (or that never started) ended unknown, as a kubelet says of
// a container it can no longer find when its pod is deleted: exit code
// 137, and the pod Failed (a Job's pod killed by a deletion did not
// succeed).
func terminalStatus(parent, d *corev1.Pod, now time.Time) corev1.PodStatus {
	st := *parent.Status.DeepCopy()
	if d != nil {
		st = translateStatus(parent, d)
	}
	seen := map[string]bool{}
	for _, cs := range st.ContainerStatuses {
		seen[cs.Name] = true
	}
	for _, c := range parent.Spec.Containers {
		if !seen[c.Name] {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image})
		}
	}
	failed := false
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		cs.Ready = false
		cs.Started = ptr.To(false)
		if cs.State.Terminated == nil {
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "ContainerStatusUnknown", FinishedAt: metav1.NewTime(now),
				Message: "the pod's delegate was deleted before it showed the container's end",
			}}
		}
		if cs.State.Terminated.ExitCode != 0 {
			failed = true
		}
	}
	st.Phase = corev1.PodSucceeded
	if failed {
		st.Phase = corev1.PodFailed
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
			st.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	return st
}

// parentOf returns the live parent pod of delegate d, or nil when it is gone
// or d belongs to an earlier pod of the same name.
func (p *Provider) parentOf(d *corev1.Pod) *corev1.Pod {
	ns, name, ok := parentKey(d)
	if !ok {
		return nil
	}
	parent, err := p.cfg.ParentPods.Pods(ns).Get(name)
	if err != nil || parent.UID != originUID(d) {
		return nil
	}
	return parent
}

func (p *Provider) delegateChanged(obj any) {
	d, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	p.held.notify(originUID(d))
	parent := p.parentOf(d)
	if parent == nil {
		return
	}
	if p.isFailed(parent.UID) {
		return
	}
	if d.DeletionTimestamp != nil && !isHeld(d) && parent.DeletionTimestamp == nil && !p.isDeleting(parent.UID) && !terminal(parent) {
		// Deleted here by someone else than Nestlet (evicted from an
		// unreachable or drained node, deleted by hand): the delegate
		// will not run to the end. Fail the parent pod now so that its
		// controller replaces it at once, as one cluster's ReplicaSet
		// replaces a terminating pod; the delegate stops meanwhile.
		p.failLost(parent, d, "is being deleted")
		return
	}
	if since, msg, stuck := unschedulable(d); stuck {
		p.scheduleBounce(parent.UID, d, since, msg)
	} else {
		p.cancelBounce(parent.UID)
	}
	up := asParent(parent, d)
	if sameStatus(parent.Status, up.Status) {
		// Most delegate changes (bound to a node, annotations, the
		// scheduling condition, which the parent keeps its own of) leave
		// the parent's status as it is: no write, at every level.
		return
	}
	p.send(up)
}

// sameStatus compares two pod statuses, conditions in any order.
func sameStatus(a, b corev1.PodStatus) bool {
	// Shallow copies, with sorted clones of the conditions: the callers'
	// statuses stay as they are, and nothing else is copied.
	for _, st := range []*corev1.PodStatus{&a, &b} {
		st.Conditions = slices.SortedFunc(slices.Values(st.Conditions), func(x, y corev1.PodCondition) int {
			return strings.Compare(string(x.Type), string(y.Type))
		})
	}
	return equality.Semantic.DeepEqual(a, b)
}

func (p *Provider) delegateDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	d, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if ns, _, ok := parentKey(d); ok {
		p.deps.enqueueGC(ns)
	}
	p.mu.Lock()
	delete(p.looked, originUID(d))
	p.mu.Unlock()
	p.held.notify(originUID(d))
	p.held.forget(originUID(d))
	if isHeld(d) {
		// A reservation withdrawn or collected: a parent pod bound here
		// meanwhile gets a new delegate (CreatePod retries).
		return
	}
	parent := p.parentOf(d)
	if parent == nil {
		return
	}
	p.cancelBounce(parent.UID)
	p.mu.Lock()
	deleting := p.deleting[parent.UID]
	delete(p.deleting, parent.UID)
	_, failed := p.failed[parent.UID]
	p.mu.Unlock()
	switch {
	case failed:
		return
	case deleting || parent.DeletionTimestamp != nil:
		out := parent.DeepCopy()
		out.Status = terminalStatus(parent, d, p.cfg.Clock.Now())
		p.send(out)
		if parent.DeletionTimestamp != nil {
			go p.removeDeleted(parent, out.Status)
		}
	case parent.Status.Phase == corev1.PodSucceeded || parent.Status.Phase == corev1.PodFailed:
		return
	default:
		p.failLost(parent, d, "was deleted")
	}
}

// failLost fails the parent pod of a delegate that someone else than
// Nestlet deleted ("was deleted") or is deleting ("is being deleted"), with
// the delegate's own reason when it has one (Evicted...).
func (p *Provider) failLost(parent, d *corev1.Pod, what string) {
	reason, msg := api.ReasonDelegateDeleted, fmt.Sprintf("the pod's delegate %s/%s in cluster %s %s there, not by Nestlet; the pod's controller replaces it", d.Namespace, d.Name, p.cfg.ClusterName, what)
	if d.Status.Reason != "" {
		reason, msg = d.Status.Reason, fmt.Sprintf("in cluster %s: %s", p.cfg.ClusterName, d.Status.Message)
	}
	p.fail(parent, d, reason, msg)
}

// isDeleting tells whether this cluster is deleting the delegate of the
// parent pod uid (the parent pod was deleted).
func (p *Provider) isDeleting(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deleting[uid]
}

// isFailed tells whether this cluster failed the parent pod uid for good
// (fail).
func (p *Provider) isFailed(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, failed := p.failed[uid]
	return failed
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// terminalWait bounds how long removeDeleted waits for the terminal status
// it sent through virtual-kubelet before it writes it itself.
var terminalWait = 10 * time.Second

// removeDeleted removes the parent pod, under deletion, once its delegate
// is gone: as a kubelet removes a pod once its containers have stopped,
// instead of waiting out the grace period (the delegate below had it, and
// honoured it). Without this, virtual-kubelet would remove it only when
// the grace period has passed.
//
// As a kubelet does, it removes the pod only once the pod shows its
// terminal status (st, sent through virtual-kubelet; written here if it
// has not arrived within terminalWait): a pod that keeps a finalizer (a
// Job's, until its controller has seen the pod end) stays after the
// removal, and one still Running then would stay for ever; and the level
// above reads the containers' exit codes from the pod's last state.
func (p *Provider) removeDeleted(parent *corev1.Pod, st corev1.PodStatus) {
	pods := p.cfg.Parent.CoreV1().Pods(parent.Namespace)
	current := func() (*corev1.Pod, bool) {
		cur, err := p.cfg.ParentPods.Pods(parent.Namespace).Get(parent.Name)
		return cur, err == nil && cur.UID == parent.UID
	}
	ctx, cancel := context.WithTimeout(p.ctx, terminalWait)
	defer cancel()
	backoff := wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Cap: time.Second, Steps: math.MaxInt32}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		cur, ok := current()
		return !ok || terminal(cur), nil
	})
	cur, ok := current()
	if !ok {
		return // gone already
	}
	if !terminal(cur) && p.ctx.Err() == nil {
		out := cur.DeepCopy()
		out.Status = st
		if _, err := pods.UpdateStatus(p.ctx, out, metav1.UpdateOptions{FieldManager: api.FieldManager}); err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(p.ctx).Error(err, "Writing the terminal status of a deleted pod before removing it", "pod", klog.KObj(parent))
		}
	}
	opts := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(parent.UID))}
	err := pods.Delete(p.ctx, parent.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && p.ctx.Err() == nil {
		// virtual-kubelet still removes it when the grace period ends.
		klog.FromContext(p.ctx).Error(err, "Removing deleted pod once its delegate is gone", "pod", klog.KObj(parent))
	}
}

// endUnrun gives the parent pod pod, deleted with no delegate that ran
// here, its terminal status, unless it has one.
func (p *Provider) endUnrun(pod *corev1.Pod) {
	if pod.UID == "" || pod.DeletionTimestamp == nil || terminal(pod) {
		return
	}
	if p.isFailed(pod.UID) {
		return
	}
	out := pod.DeepCopy()
	out.Status = terminalStatus(pod, nil, p.cfg.Clock.Now())
	p.send(out)
}

// fail marks the parent pod Failed with reason and message, for good: this
// cluster will not create it again.
func (p *Provider) fail(parent, d *corev1.Pod, reason, msg string) {
	out := parent.DeepCopy()
	if d != nil {
		out.Status = translateStatus(parent, d)
	}
	out.Status.Phase = corev1.PodFailed
	out.Status.Reason = reason
	out.Status.Message = msg
	p.mu.Lock()
	p.failed[parent.UID] = out
	p.mu.Unlock()
	p.cfg.Recorder.Event(parent, corev1.EventTypeWarning, reason, msg)
	p.cfg.Metrics.errors.WithLabelValues(p.cfg.TargetName, reason).Inc()
	klog.FromContext(p.ctx).Info("Failing parent pod", "pod", klog.KObj(parent), "reason", reason, "message", msg)
	p.send(out.DeepCopy())
}
