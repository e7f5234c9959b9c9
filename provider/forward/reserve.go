package forward

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// Placement by reservation (api/reservation.go): the parent's scheduler
// asks, at Permit, for a place for a pod it means to bind to this virtual
// node. Reserve creates the delegate held; this cluster's scheduler
// chooses its node and holds it there (the Reservation plugin), or says
// why it cannot. Binding the parent pod releases the held delegate
// (release, from CreatePod); a withdrawn reservation (Withdraw, the
// parent's Unreserve) or one never released (collectHeld) is deleted.

// DefaultReserveWait bounds how long Reserve waits for this cluster's
// scheduler when the caller says nothing.
const DefaultReserveWait = 30 * time.Second

// errHeldGone: a held delegate was withdrawn as its parent pod was bound
// here; CreatePod retries, and makes an ordinary delegate.
var errHeldGone = errors.New("it was withdrawn as the pod was bound here: a new delegate follows")

// Reservable reports whether the pod can be placed by reservation: a pod
// whose volumes this cluster must make before it can be scheduled here
// (PersistentVolumeClaims, generic ephemeral volumes: made when the parent
// pod is bound) is bound first and placed after, as before reservations.
func Reservable(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return false
		}
	}
	return true
}

// holds are the Reserve calls waiting for their delegate to change, and
// when each parent pod was last asked for, by parent pod UID.
type holds struct {
	mu      sync.Mutex
	waiters map[types.UID]chan struct{}
	// asked and released are when a pod's reservation was last asked for
	// and when its delegate was released.
	asked, released stamps
}

// stamps holds a time per pod, safe for concurrent use.
type stamps struct {
	mu sync.Mutex
	at map[types.UID]time.Time
}

func (s *stamps) set(uid types.UID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[types.UID]time.Time{}
	}
	s.at[uid] = now
}

func (s *stamps) get(uid types.UID) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[uid]
}

func (s *stamps) drop(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.at, uid)
}

func (h *holds) forget(uid types.UID) {
	h.asked.drop(uid)
	h.released.drop(uid)
}

func (h *holds) wait(uid types.UID) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiters == nil {
		h.waiters = map[types.UID]chan struct{}{}
	}
	ch := make(chan struct{}, 1)
	h.waiters[uid] = ch
	return ch
}

func (h *holds) done(uid types.UID, ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiters[uid] == ch {
		delete(h.waiters, uid)
	}
}

func (h *holds) notify(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.waiters[uid]; ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// isHeld reports whether d is a reservation not yet released.
func isHeld(d *corev1.Pod) bool { return d.Annotations[api.AnnotationHold] == api.HoldHeld }

// Reserve places a delegate of pod (a parent pod not bound yet) in this
// cluster, held, and waits up to maxWait for this cluster's scheduler to
// hold a place for it or to say why it has none. A pod the child does not
// hold (Reservable) gets Held false and no delegate: the parent binds it
// as before.
func (p *Provider) Reserve(ctx context.Context, pod *corev1.Pod, maxWait time.Duration) (api.Reservation, error) {
	if pod.Spec.NodeName != "" {
		return api.Reservation{}, fmt.Errorf("%w: pod %s/%s is already bound to %s", api.ErrBadReservation, pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	if pod.UID == "" {
		return api.Reservation{}, fmt.Errorf("%w: pod %s/%s has no UID", api.ErrBadReservation, pod.Namespace, pod.Name)
	}
	if !Reservable(pod) {
		return api.Reservation{}, nil
	}
	if why := admit(pod, p.cfg.TrustedSchedulers, p.takesDaemonSets()); why != "" {
		return api.Reservation{Unschedulable: why}, nil
	}
	if why := p.admitHere(pod); why != "" {
		return api.Reservation{Unschedulable: why}, nil
	}
	if why, err := p.deps.conflict(ctx, pod); err != nil {
		return api.Reservation{}, err
	} else if why != "" {
		return api.Reservation{Unschedulable: why}, nil
	}
	path, err := nextPath(pod, p.cfg.ParentName, p.cfg.ClusterName, p.cfg.HopLimit)
	if err != nil {
		return api.Reservation{Unschedulable: err.Error()}, nil
	}
	if maxWait <= 0 {
		maxWait = DefaultReserveWait
	}
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	p.held.asked.set(pod.UID, p.cfg.Clock.Now())
	p.withdrawReplaced(pod.Namespace, pod.Name, pod.UID)
	ch := p.held.wait(pod.UID)
	defer p.held.done(pod.UID, ch)
	d, err := p.createHeld(ctx, pod, path)
	if err != nil {
		if ctx.Err() != nil {
			// The create may have gone through as the caller left.
			p.withdrawByName(pod.Namespace, pod.Name, pod.UID)
		}
		return api.Reservation{}, err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if cur := p.delegateOf(pod.Namespace, pod.Name, pod.UID); cur != nil {
			d = cur
		}
		switch node := reservedOn(d); {
		case node != "":
			return api.Reservation{Held: true, Node: node}, nil
		case d.DeletionTimestamp != nil:
			return api.Reservation{}, fmt.Errorf("the reservation of pod %s/%s in %s was withdrawn", pod.Namespace, pod.Name, p.cfg.ClusterName)
		}
		if _, msg, stuck := unschedulable(d); stuck && !strings.Contains(msg, api.TryingOtherNodes) {
			if strings.Contains(msg, api.NoAnswerYet) {
				// Not this cluster's last word: a cluster below did not
				// answer. Withdrawn here; the parent asks again shortly.
				p.withdrawHeld(d)
				return api.Reservation{Unschedulable: msg, Retry: true}, nil
			}
			if p.cfg.WaitForRoom {
				// Pending here, where this cluster's autoscaler sees it,
				// for as long as the parent asks (collectHeld).
				return api.Reservation{Unschedulable: msg, Waiting: true}, nil
			}
			p.withdrawHeld(d)
			return api.Reservation{Unschedulable: msg}, nil
		}
		select {
		case <-ctx.Done():
			if !p.cfg.WaitForRoom {
				p.withdrawByName(pod.Namespace, pod.Name, pod.UID)
			}
			return api.Reservation{}, fmt.Errorf("cluster %s's scheduler neither placed pod %s/%s nor said why within %s", p.cfg.ClusterName, pod.Namespace, pod.Name, maxWait)
		case <-ch:
		case <-tick.C:
		}
	}
}

// reservedOn returns the node this cluster holds (or has bound) d on.
func reservedOn(d *corev1.Pod) string {
	if d.Spec.NodeName != "" {
		return d.Spec.NodeName
	}
	return d.Annotations[api.AnnotationReservedOn]
}

// createHeld creates the held delegate of pod, or returns the one an
// earlier request made.
func (p *Provider) createHeld(ctx context.Context, pod *corev1.Pod, path []string) (*corev1.Pod, error) {
	if d := p.delegateOf(pod.Namespace, pod.Name, pod.UID); d != nil && d.DeletionTimestamp == nil {
		return d, nil
	}
	if err := p.ensureNamespace(ctx, p.ns(pod.Namespace)); err != nil {
		return nil, p.errorf("namespace", "creating namespace %s in %s: %w", p.ns(pod.Namespace), p.cfg.ClusterName, err)
	}
	if err := p.ensureClasses(ctx, pod); err != nil {
		return nil, p.errorf("dependencies", "the classes of pod %s/%s in %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, err)
	}
	if err := p.deps.serviceAccountFor(ctx, pod); err != nil {
		return nil, p.errorf("dependencies", "the service account of pod %s/%s in %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, err)
	}
	identity, err := p.withParentIdentity(pod)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s waits for the parent to state on virtual node %s whether its gateway relays its API server: %w",
			pod.Namespace, pod.Name, p.cfg.ClusterName, err)
	}
	pods := p.cfg.Child.CoreV1().Pods(p.ns(pod.Namespace))
	for _, taken := range []bool{false, true} {
		d := buildDelegate(pod, delegateName(pod, taken), &p.cfg, path)
		d.Annotations[api.AnnotationHold] = api.HoldHeld
		if identity {
			if err := withIdentity(d, pod, p.cfg.OriginAPI); err != nil {
				return nil, err
			}
		}
		created, err := pods.Create(ctx, d, metav1.CreateOptions{FieldManager: api.FieldManager})
		if err == nil {
			klog.FromContext(ctx).V(2).Info("Created held delegate", "pod", klog.KObj(pod), "delegate", d.Name)
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, p.errorf("create", "creating the held delegate of %s/%s in %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, err)
		}
		existing, gerr := pods.Get(ctx, d.Name, metav1.GetOptions{})
		if gerr == nil && existing.Annotations[api.AnnotationOrigin] == d.Annotations[api.AnnotationOrigin] {
			if existing.DeletionTimestamp != nil {
				return nil, fmt.Errorf("the last reservation of pod %s/%s in %s is still being withdrawn", pod.Namespace, pod.Name, p.cfg.ClusterName)
			}
			return existing, nil
		}
	}
	return nil, p.errorf("create", "creating the held delegate of %s/%s in %s: both %s and %s are taken", pod.Namespace, pod.Name, p.cfg.ClusterName, pod.Name, delegateName(pod, true))
}

// release makes the held delegate d of pod, now bound here, an ordinary
// one: what it references is copied, its identity issued, and this
// cluster's scheduler lets it go to the node it holds.
func (p *Provider) release(ctx context.Context, pod, d *corev1.Pod) error {
	start := p.cfg.Clock.Now()
	if err := p.ensureNamespace(ctx, p.ns(pod.Namespace)); err != nil {
		return p.errorf("namespace", "creating namespace %s in %s: %w", p.ns(pod.Namespace), p.cfg.ClusterName, err)
	}
	if err := p.deps.copyFor(ctx, pod); err != nil {
		return p.errorf("dependencies", "copying what pod %s/%s references into %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, err)
	}
	// Decided when the delegate was made (hold): it reads its tokens from
	// the identity Secret, or its kubelet mounts this cluster's; a level
	// below the one that issued them copies that Secret (copyFor above).
	if identityIssuedHere(d, pod) {
		if err := p.ids.issue(ctx, pod, nil); err != nil {
			return p.errorf("identity", "the service account tokens of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if err := p.ids.own(ctx, pod, d); err != nil {
			klog.FromContext(ctx).Info("The identity Secret stays the Target's", "pod", klog.KObj(pod), "err", err)
		}
	}
	pods := p.cfg.Child.CoreV1().Pods(d.Namespace)
	// One write, applied only to this delegate still held; if it is not
	// applied, what the delegate is now says why: released already (by an
	// earlier attempt), gone, or still held (the write's error stands and
	// is retried if it passes).
	patched, err := pods.Patch(ctx, d.Name, types.JSONPatchType, releasePatch(d.UID), metav1.PatchOptions{FieldManager: api.FieldManager})
	switch {
	case err == nil && patched.DeletionTimestamp != nil, apierrors.IsNotFound(err):
		err = errHeldGone
	case err != nil:
		cur, gerr := pods.Get(ctx, d.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr) || (gerr == nil && (cur.UID != d.UID || cur.DeletionTimestamp != nil)):
			err = errHeldGone
		case gerr == nil && cur.Annotations[api.AnnotationHold] != api.HoldHeld:
			err = nil
		}
	}
	if err != nil {
		return p.errorf("create", "releasing the held delegate of %s/%s in %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, err)
	}
	p.held.released.set(pod.UID, p.cfg.Clock.Now())
	p.cfg.Metrics.forwarded.WithLabelValues(p.cfg.TargetName).Inc()
	p.cfg.Metrics.latency.WithLabelValues(p.cfg.TargetName).Observe(p.cfg.Clock.Since(start).Seconds())
	klog.FromContext(ctx).V(2).Info("Released held delegate", "pod", klog.KObj(pod), "delegate", d.Name, "node", reservedOn(d))
	return nil
}

// releasePatch is the JSON patch that releases the held delegate of UID
// uid: it applies only if the pod is still that one and still held.
func releasePatch(uid types.UID) []byte {
	key := strings.ReplaceAll(api.AnnotationHold, "/", "~1")
	return fmt.Appendf(nil, `[{"op":"test","path":"/metadata/uid","value":%q},`+
		`{"op":"test","path":"/metadata/annotations/%s","value":%q},`+
		`{"op":"replace","path":"/metadata/annotations/%s","value":%q}]`, uid, key, api.HoldHeld, key, api.HoldReleased)
}

// Withdraw deletes the held delegate of the parent pod namespace/name
// (of UID uid, when given): the parent's scheduler did not bind it here.
// A released delegate is left alone.
func (p *Provider) Withdraw(namespace, name string, uid types.UID) {
	p.withdrawByName(namespace, name, uid)
}

// withdrawByName deletes the held delegate of the parent pod
// namespace/name (of UID uid, when given), read from this cluster's API
// server rather than the informer: one created a moment ago counts.
func (p *Provider) withdrawByName(namespace, name string, uid types.UID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
	defer cancel()
	names := []string{name}
	if uid != "" {
		names = append(names, delegateName(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}, true))
	}
	for _, n := range names {
		d, err := p.cfg.Child.CoreV1().Pods(p.ns(namespace)).Get(ctx, n, metav1.GetOptions{})
		if err != nil || !isHeld(d) || d.Labels[api.LabelTargetUID] != string(p.cfg.TargetUID) ||
			d.Annotations[api.AnnotationParentPod] != namespace+"/"+name || (uid != "" && originUID(d) != uid) {
			continue
		}
		p.withdrawHeld(d)
	}
}

// withdrawReplaced withdraws the held delegates of earlier parent pods
// named namespace/name (of another UID than uid): the parent now has a pod
// of that name, so theirs is gone, and their withdrawal was lost (the
// tunnel dropped as the parent's scheduler gave up). Withdrawn at once,
// not left to collectHeld, so that they hold no place here meanwhile.
func (p *Provider) withdrawReplaced(namespace, name string, uid types.UID) {
	objs, err := p.delegates.GetIndexer().ByIndex(indexParent, string(p.cfg.TargetUID)+"/"+namespace+"/"+name)
	if err != nil {
		return
	}
	for _, o := range objs {
		if d := o.(*corev1.Pod); isHeld(d) && d.DeletionTimestamp == nil && originUID(d) != uid {
			klog.FromContext(p.ctx).V(2).Info("Withdrawing the held delegate of a pod since replaced", "delegate", klog.KObj(d), "pod", klog.KRef(namespace, name))
			p.withdrawHeld(d)
		}
	}
}

func (p *Provider) withdrawHeld(d *corev1.Pod) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
	defer cancel()
	err := p.cfg.Child.CoreV1().Pods(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &d.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(p.ctx).Error(err, "Withdrawing a held delegate", "delegate", klog.KObj(d))
	}
}

// collectHeld deletes, every interval, the held delegates whose parent
// pod was neither bound here nor asked for in api.HeldMaxAge (its
// scheduler went elsewhere and its withdrawal was lost, or it was
// deleted; a pod waiting for room is asked for again every
// api.RenewWaiting).
func (p *Provider) collectHeld(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(context.Context) {
		delegates, _ := p.lister.List(labels.Everything())
		for _, d := range delegates {
			last := d.CreationTimestamp.Time
			if at := p.held.asked.get(originUID(d)); at.After(last) {
				last = at
			}
			if isHeld(d) && d.DeletionTimestamp == nil && p.cfg.Clock.Since(last) > p.cfg.HeldMaxAge && p.parentOf(d) == nil {
				klog.FromContext(ctx).V(2).Info("Collecting a held delegate whose parent pod was not bound here", "delegate", klog.KObj(d))
				p.withdrawHeld(d)
			}
		}
	}, interval)
}
