package forward

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"

	"github.com/nestlet/nestlet/api"
)

// CreatePod creates the delegate of pod in this cluster, after the objects
// it references. It is idempotent: a pod that already has its delegate is
// left alone, so an agent restarted at any point creates no second one. A
// passing error of this cluster's API server is retried (retry.go).
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	return p.orRetry(pod, p.createPod(ctx, pod))
}

func (p *Provider) createPod(ctx context.Context, pod *corev1.Pod) error {
	start := p.cfg.Clock.Now()
	p.withdrawReplaced(pod.Namespace, pod.Name, pod.UID)
	if d := p.delegateOf(pod.Namespace, pod.Name, pod.UID); d != nil {
		switch {
		case isHeld(d) && d.DeletionTimestamp != nil:
			return p.errorf("create", "the reservation of pod %s/%s in %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, errHeldGone)
		case isHeld(d): // reserved before the pod was bound here (reserve.go)
			if err := p.release(ctx, pod, d); err != nil || !skipDuplicateGuard {
				return err
			}
			// the broken build: a second delegate besides
		case !skipDuplicateGuard:
			return nil
		}
	}
	if why := admit(pod, p.cfg.TrustedSchedulers, p.takesDaemonSets()); why != "" {
		p.fail(pod, nil, api.ReasonNotAdmitted, why)
		return nil
	}
	if why := p.admitHere(pod); why != "" {
		p.fail(pod, nil, api.ReasonNotAdmitted, why)
		return nil
	}
	path, err := nextPath(pod, p.cfg.ParentName, p.cfg.ClusterName, p.cfg.HopLimit)
	if err != nil {
		p.fail(pod, nil, api.ReasonLoop, err.Error())
		return nil
	}
	if err := p.ensureNamespace(ctx, p.ns(pod.Namespace)); err != nil {
		return p.errorf("namespace", "creating namespace %s in %s: %w", p.ns(pod.Namespace), p.cfg.ClusterName, err)
	}
	if err := p.deps.copyFor(ctx, pod); err != nil {
		return p.errorf("dependencies", "copying what pod %s/%s references into %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, err)
	}
	if why, err := p.overStorage(ctx, pod); err != nil {
		return p.errorf("claims", "the claims of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	} else if why != "" {
		p.fail(pod, nil, api.ReasonNotAdmitted, why)
		return nil
	}
	if why, err := p.claims.ensureFor(ctx, pod); why != "" {
		p.fail(pod, nil, api.ReasonClaimConflict, why)
		return nil
	} else if err != nil {
		return p.errorf("claims", "the claims of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := p.ensureClasses(ctx, pod); err != nil {
		return p.errorf("dependencies", "the classes of pod %s/%s in %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, err)
	}
	identity, err := p.withParentIdentity(pod)
	if err != nil {
		return p.errorf("identity", "pod %s/%s waits for the parent to state on virtual node %s whether its gateway relays its API server (annotation %s): a delegate made now would keep calling the wrong API server: %w",
			pod.Namespace, pod.Name, p.cfg.ClusterName, api.AnnotationGatewayParent, err)
	}
	if identity {
		if err := p.ids.issue(ctx, pod, nil); err != nil {
			return p.errorf("identity", "the service account tokens of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	pods := p.cfg.Child.CoreV1().Pods(p.ns(pod.Namespace))
	for _, taken := range []bool{false, true} {
		d := buildDelegate(pod, delegateName(pod, taken), &p.cfg, path)
		if identity {
			if err := withIdentity(d, pod, p.cfg.OriginAPI); err != nil {
				return p.errorf("identity", "pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		}
		created, err := pods.Create(ctx, d, metav1.CreateOptions{FieldManager: api.FieldManager})
		if err == nil {
			if identity {
				if err := p.ids.own(ctx, pod, created); err != nil {
					klog.FromContext(ctx).Info("The identity Secret stays the Target's", "pod", klog.KObj(pod), "err", err)
				}
			}
			p.cfg.Metrics.forwarded.WithLabelValues(p.cfg.TargetName).Inc()
			p.cfg.Metrics.latency.WithLabelValues(p.cfg.TargetName).Observe(p.cfg.Clock.Since(start).Seconds())
			klog.FromContext(ctx).V(2).Info("Created delegate", "pod", klog.KObj(pod), "delegate", d.Name, "path", d.Annotations[api.AnnotationPath])
			if skipDuplicateGuard && !taken {
				continue // the broken build: a second delegate
			}
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return p.errorf("create", "creating delegate of %s/%s in %s: %w", pod.Namespace, pod.Name, p.cfg.ClusterName, err)
		}
		existing, gerr := pods.Get(ctx, d.Name, metav1.GetOptions{})
		if gerr == nil && existing.Annotations[api.AnnotationOrigin] == d.Annotations[api.AnnotationOrigin] && (!skipDuplicateGuard || taken) {
			if isHeld(existing) && existing.DeletionTimestamp == nil {
				// This pod's reservation, not yet in the informer: it is
				// released, not left held.
				return p.release(ctx, pod, existing)
			}
			return nil // made by an earlier attempt
		}
	}
	return p.errorf("create", "creating delegate of %s/%s in %s: both %s and %s are taken", pod.Namespace, pod.Name, p.cfg.ClusterName, pod.Name, delegateName(pod, true))
}

func (p *Provider) errorf(reason, format string, args ...any) error {
	p.cfg.Metrics.errors.WithLabelValues(p.cfg.TargetName, reason).Inc()
	return fmt.Errorf(format, args...)
}

func (p *Provider) ensureNamespace(ctx context.Context, name string) error {
	meta := metav1.ObjectMeta{Name: name, Labels: p.namespaceLabels()}
	if p.cfg.Namespaces.Prefix != "" {
		// This parent's alone (Prefixed): it goes with the Target, as
		// everything in it does.
		meta.OwnerReferences = []metav1.OwnerReference{targetOwner(&p.cfg)}
	}
	created, err := p.cfg.Keeper.ensure(ctx, meta)
	if err != nil {
		return err
	}
	if created {
		// A namespace just made has no default service account until
		// this cluster's controller manager makes one, and a pod created
		// before that is refused: make it now. Should this fail, the
		// refusal is retried (transient).
		_, err := p.cfg.Child.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
			metav1.CreateOptions{FieldManager: api.FieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			klog.FromContext(ctx).V(2).Info("Creating the default service account of a new namespace", "namespace", name, "err", err)
		}
	}
	return nil
}

// UpdatePod carries what may change on a running pod (labels, annotations,
// images, active deadline, added tolerations) to its delegate, or creates
// it when there is none. A passing error is retried, as in CreatePod.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	return p.orRetry(pod, p.updatePod(ctx, pod))
}

func (p *Provider) updatePod(ctx context.Context, pod *corev1.Pod) error {
	d := p.delegateOf(pod.Namespace, pod.Name, pod.UID)
	if d == nil || isHeld(d) {
		// No delegate yet, or one still held: a retry of CreatePod
		// (retry.go) comes here, and a held delegate it left is released
		// there, not edited into one this cluster's scheduler never lets go.
		return p.createPod(ctx, pod)
	}
	final := updatedDelegate(pod, d)
	pods := p.cfg.Child.CoreV1().Pods(d.Namespace)
	opts := metav1.UpdateOptions{FieldManager: api.FieldManager}
	// Ephemeral containers (kubectl debug) and resources (an in-place
	// resize) change through their subresources only, as the parent's
	// did: everything else first, then each of those, each write only
	// where it changes something.
	want := final.DeepCopy()
	setResources(want, d)
	want.Spec.EphemeralContainers = d.Spec.EphemeralContainers
	cur := d
	if !equality.Semantic.DeepEqual(want.Labels, d.Labels) || !equality.Semantic.DeepEqual(want.Annotations, d.Annotations) ||
		!equality.Semantic.DeepEqual(want.Spec, d.Spec) {
		var err error
		if cur, err = pods.Update(ctx, want, opts); err != nil {
			return p.errorf("update", "updating delegate %s/%s: %w", d.Namespace, d.Name, err)
		}
	}
	if !equality.Semantic.DeepEqual(final.Spec.EphemeralContainers, cur.Spec.EphemeralContainers) {
		next := cur.DeepCopy()
		next.Spec.EphemeralContainers = final.Spec.EphemeralContainers
		var err error
		if cur, err = pods.UpdateEphemeralContainers(ctx, next.Name, next, opts); err != nil {
			return p.errorf("update", "adding ephemeral containers to delegate %s/%s: %w", d.Namespace, d.Name, err)
		}
	}
	if !sameResources(final, cur) {
		next := cur.DeepCopy()
		setResources(next, final)
		if _, err := pods.UpdateResize(ctx, next.Name, next, opts); err != nil {
			return p.errorf("update", "resizing delegate %s/%s: %w", d.Namespace, d.Name, err)
		}
	}
	return nil
}

// resourcesDigest is a digest of what pod's containers ask for
// (AnnotationResources).
func resourcesDigest(pod *corev1.Pod) string {
	var all []corev1.ResourceRequirements
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			all = append(all, c.Resources)
		}
	}
	raw, _ := json.Marshal(all)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// setResources gives the containers of dst the resources of src's.
func setResources(dst, src *corev1.Pod) {
	for _, cs := range []struct{ dst, src []corev1.Container }{
		{dst.Spec.Containers, src.Spec.Containers}, {dst.Spec.InitContainers, src.Spec.InitContainers},
	} {
		for i := range cs.dst {
			if i < len(cs.src) {
				cs.dst[i].Resources = *cs.src[i].Resources.DeepCopy()
			}
		}
	}
}

// sameResources says whether the containers of a and b ask for the same
// resources.
func sameResources(a, b *corev1.Pod) bool {
	for _, cs := range [][2][]corev1.Container{{a.Spec.Containers, b.Spec.Containers}, {a.Spec.InitContainers, b.Spec.InitContainers}} {
		for i := range min(len(cs[0]), len(cs[1])) {
			if !equality.Semantic.DeepEqual(cs[0][i].Resources, cs[1][i].Resources) {
				return false
			}
		}
	}
	return true
}

// topologyLabelPrefix starts the labels an API server copies from a node
// to the pods bound to it.
const topologyLabelPrefix = "topology.kubernetes.io/"

// delegateOwn are the delegate's annotations that are this level's, not the
// parent pod's: an update keeps them as they are.
var delegateOwn = []string{api.AnnotationOrigin, api.AnnotationPath, api.AnnotationParentPod, api.AnnotationOwnerKind,
	api.AnnotationOwnerUID, api.AnnotationDomains, api.AnnotationIdentity, api.AnnotationHold, api.AnnotationReservedOn, api.AnnotationResources}

// updatedDelegate is d as the parent pod asks it to be now: what may change
// on a running pod (labels, annotations, images, active deadline, added
// tolerations, ephemeral containers, the containers' resources: an
// in-place resize) taken from pod, the rest d's own.
func updatedDelegate(pod, d *corev1.Pod) *corev1.Pod {
	want := d.DeepCopy()
	want.Labels = maps.Clone(pod.Labels)
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	if v, ok := d.Labels[api.LabelTargetUID]; ok {
		want.Labels[api.LabelTargetUID] = v
	}
	// The topology labels this cluster's API server gave the delegate
	// from its node when it was bound (PodTopologyLabels admission) are
	// the delegate's, where the parent pod has none of its own.
	for k, v := range d.Labels {
		if _, parents := pod.Labels[k]; !parents && strings.HasPrefix(k, topologyLabelPrefix) {
			want.Labels[k] = v
		}
	}
	want.Annotations = maps.Clone(pod.Annotations)
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	// The delegate's topology domains, if any, are this cluster's
	// scheduler's, not the parent's (placeInDomains).
	delete(want.Annotations, api.AnnotationDomains)
	for _, k := range delegateOwn {
		delete(want.Annotations, k)
		if v, ok := d.Annotations[k]; ok {
			want.Annotations[k] = v
		}
	}
	for i := range want.Spec.Containers {
		if i < len(pod.Spec.Containers) {
			want.Spec.Containers[i].Image = pod.Spec.Containers[i].Image
		}
	}
	for i := range want.Spec.InitContainers {
		if i < len(pod.Spec.InitContainers) {
			want.Spec.InitContainers[i].Image = pod.Spec.InitContainers[i].Image
		}
	}
	want.Spec.EphemeralContainers = pod.Spec.EphemeralContainers
	// Resized at the parent since the delegate was made or last resized
	// (its own resources may hold what this cluster's admission added).
	// A delegate made before the digest was kept is compared as it is.
	digest := resourcesDigest(pod)
	if had, ok := d.Annotations[api.AnnotationResources]; (ok && had != digest) || (!ok && !sameResources(pod, d)) {
		setResources(want, pod)
		keepExtendedResources(want, d)
		want.Annotations[api.AnnotationResources] = digest
	}
	want.Spec.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	if len(pod.Spec.Tolerations) > len(want.Spec.Tolerations) {
		want.Spec.Tolerations = append(want.Spec.Tolerations, pod.Spec.Tolerations[len(want.Spec.Tolerations):]...)
	}
	return want
}

// delegateBehind says whether d lags behind the parent pod in what an
// update carries (updatedDelegate).
func delegateBehind(pod, d *corev1.Pod) bool {
	want := updatedDelegate(pod, d)
	return !equality.Semantic.DeepEqual(want.Labels, d.Labels) || !equality.Semantic.DeepEqual(want.Annotations, d.Annotations) ||
		!equality.Semantic.DeepEqual(want.Spec, d.Spec)
}

// DeletePod deletes the delegate with the parent pod's grace period; the
// parent pod gets its terminal status once the delegate is gone.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	p.cancelBounce(pod.UID)
	p.forgetRetry(pod.UID)
	d := p.delegateOf(pod.Namespace, pod.Name, pod.UID)
	if d == nil || isHeld(d) {
		// Nothing ran here: a held delegate (not yet released) is
		// withdrawn, and the pod ends Failed before virtual-kubelet
		// removes it, as a kubelet ends a pod deleted before it started
		// (one that keeps a finalizer, a Job's, would stay Pending).
		if d != nil {
			p.withdrawHeld(d)
		}
		p.endUnrun(pod)
		return errdefs.NotFoundf("pod %s/%s has no delegate in %s", pod.Namespace, pod.Name, p.cfg.ClusterName)
	}
	p.mu.Lock()
	p.deleting[originUID(d)] = true
	p.mu.Unlock()
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &d.UID}}
	if pod.DeletionGracePeriodSeconds != nil {
		opts.GracePeriodSeconds = pod.DeletionGracePeriodSeconds
	}
	err := p.cfg.Child.CoreV1().Pods(d.Namespace).Delete(ctx, d.Name, opts)
	if apierrors.IsNotFound(err) {
		return errdefs.NotFoundf("delegate %s/%s is already gone", d.Namespace, d.Name)
	}
	if err != nil {
		return p.errorf("delete", "deleting delegate %s/%s: %w", d.Namespace, d.Name, err)
	}
	return nil
}
