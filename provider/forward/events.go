package forward

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
)

// Events up. The events this cluster records about the delegates of this
// Target (a kubelet's image pulls, container starts and stops, failed
// probes and mounts, back-offs, OOM kills; what Nestlet says about them one
// level down) are recorded again on their parent pods, where `kubectl
// describe pod` in the parent shows them as it would a kubelet's: with the
// same type, reason and message, and a count that grows as theirs does (the
// parent's recorder aggregates repeats, and its spam filter rate-limits a
// noisy pod). The agent of the parent cluster does the same one level up,
// so a leaf's events reach the root, each level adding one event write per
// event. Tools wait on them: the conformance suite's sysctl specs wait for
// a pod's Started (or Failed) event. The child's own placement of a
// delegate (Scheduled) stays there: the parent's scheduler recorded its own.

// eventSelector is what the reflector watches: events about pods, but a
// scheduler's placements.
var eventSelector = fields.AndSelectors(
	fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
	fields.OneTermNotEqualSelector("reason", reasonScheduled),
).String()

// reasonScheduled is a scheduler's event for a pod it bound.
const reasonScheduled = "Scheduled"

// eventReflector follows this cluster's events about pods.
type eventReflector struct {
	p        *Provider
	informer cache.SharedIndexInformer
	// since is when the reflector started: events last seen before it
	// were reflected by an earlier run (or are history), not again.
	since time.Time
}

func newEventReflector(p *Provider) *eventReflector {
	inf := coreinformers.NewFilteredEventInformer(p.cfg.Child, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = eventSelector })
	return &eventReflector{p: p, informer: inf}
}

func (r *eventReflector) run(ctx context.Context) {
	r.since = r.p.cfg.Clock.Now()
	if _, err := r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.reflect(ctx, nil, obj) },
		UpdateFunc: func(oldObj, newObj any) {
			r.reflect(ctx, oldObj, newObj)
		},
	}); err != nil {
		klog.FromContext(ctx).Error(err, "Reflecting events")
		return
	}
	r.informer.RunWithContext(ctx)
}

// reflect records event obj (seen before as old, when not nil) on the
// parent pod of the delegate it is about, once per occurrence.
func (r *eventReflector) reflect(ctx context.Context, old, obj any) {
	e, ok := obj.(*corev1.Event)
	if !ok || e.InvolvedObject.Kind != "Pod" || e.Reason == reasonScheduled {
		return
	}
	if o, ok := old.(*corev1.Event); ok && eventCount(o) >= eventCount(e) {
		return // nothing new happened (a resync, or a change of metadata)
	}
	if last := lastSeen(e); !last.IsZero() && last.Before(r.since.Add(-time.Second)) {
		return
	}
	d, err := r.p.lister.Pods(e.InvolvedObject.Namespace).Get(e.InvolvedObject.Name)
	if err != nil || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != d.UID) {
		return // not this Target's delegate, or an earlier pod of that name
	}
	ns, name, ok := strings.Cut(d.Annotations[api.AnnotationParentPod], "/")
	if !ok {
		return
	}
	parent, err := r.p.cfg.ParentPods.Pods(ns).Get(name)
	if err != nil || parent.UID != originUID(d) {
		return
	}
	r.p.cfg.Recorder.Event(parent, e.Type, e.Reason, e.Message)
	r.p.cfg.Metrics.eventsReflected.WithLabelValues(r.p.cfg.TargetName).Inc()
	klog.FromContext(ctx).V(4).Info("Reflected an event on the parent pod", "pod", klog.KObj(parent), "reason", e.Reason)
}

// eventCount is how many times an event happened (at least once).
func eventCount(e *corev1.Event) int32 {
	n := e.Count
	if e.Series != nil && e.Series.Count > n {
		n = e.Series.Count
	}
	return max(n, 1)
}

// lastSeen is when an event last happened, as its recorder says.
func lastSeen(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
