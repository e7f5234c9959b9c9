package forward

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// The cluster-scoped classes a pod names (its PriorityClass and its
// RuntimeClass) must exist where its delegate is made: admission here
// refuses a pod whose class does not. Where this cluster has none of that
// name, the forwarder makes one as the parent has it; a class this cluster
// has already keeps its own definition: its admin's. Classes are kept once
// made (they are cluster-wide, and cost nothing idle); a PriorityClass the
// forwarder made is made again when the parent's gives pods another value
// (the parent's was deleted and made anew: a class's value cannot change).

// ensureClasses makes the classes pod names that this cluster lacks.
func (p *Provider) ensureClasses(ctx context.Context, pod *corev1.Pod) error {
	if err := p.ensurePriorityClass(ctx, pod); err != nil {
		return fmt.Errorf("priority class %s: %w", pod.Spec.PriorityClassName, err)
	}
	if err := p.ensureRuntimeClass(ctx, pod); err != nil {
		return fmt.Errorf("runtime class %s: %w", ptr.Deref(pod.Spec.RuntimeClassName, ""), err)
	}
	return nil
}

// classLabels mark a class the forwarder made.
func classLabels() map[string]string {
	return map[string]string{LabelNamespaceManagedBy: NamespaceManagedBy}
}

// ensurePriorityClass makes the PriorityClass pod names, with the priority
// and preemption policy the parent resolved it to (the pod carries both).
// The system classes exist everywhere. A copy whose value is no longer the
// parent's is replaced; this cluster's own class of that name is kept.
func (p *Provider) ensurePriorityClass(ctx context.Context, pod *corev1.Pod) error {
	name := pod.Spec.PriorityClassName
	if name == "" || strings.HasPrefix(name, "system-") || pod.Spec.Priority == nil {
		return nil
	}
	want := *pod.Spec.Priority
	if v, ok := p.priorityClasses.Load(name); ok && v.(int32) == want {
		return nil
	}
	classes := p.cfg.Child.SchedulingV1().PriorityClasses()
	have, err := classes.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case have.Value == want || have.Labels[LabelNamespaceManagedBy] != NamespaceManagedBy:
		// Ours and current, or this cluster's admin's: kept.
		p.priorityClasses.Store(name, want)
		return nil
	default:
		// Our copy of a class the parent has made anew with another value.
		err := classes.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("replacing the copy of value %d: %w", have.Value, err)
		}
	}
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: classLabels()},
		Value:       want,
		Description: fmt.Sprintf("copied by Nestlet from cluster %s, where pod %s/%s names it", p.cfg.ParentName, pod.Namespace, pod.Name),
	}
	if pod.Spec.PreemptionPolicy != nil {
		pc.PreemptionPolicy = ptr.To(*pod.Spec.PreemptionPolicy)
	}
	_, err = classes.Create(ctx, pc, metav1.CreateOptions{FieldManager: api.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err == nil {
		p.priorityClasses.Store(name, want)
	}
	return nil
}

// ensureRuntimeClass makes the RuntimeClass pod names as the parent has
// it: its handler, overhead and scheduling (a node reads RuntimeClasses,
// which its kubelet needs). One the parent no longer has is left to this
// cluster's admission, which refuses the pod and says why.
func (p *Provider) ensureRuntimeClass(ctx context.Context, pod *corev1.Pod) error {
	name := ptr.Deref(pod.Spec.RuntimeClassName, "")
	if name == "" {
		return nil
	}
	if _, ok := p.runtimeClasses.Load(name); ok {
		return nil
	}
	src, err := p.cfg.Parent.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading it in %s: %w", p.cfg.ParentName, err)
	}
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: classLabels()},
		Handler: src.Handler, Overhead: src.Overhead.DeepCopy(), Scheduling: src.Scheduling.DeepCopy()}
	_, err = p.cfg.Child.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{FieldManager: api.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	p.runtimeClasses.Store(name, true)
	return nil
}
