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
// has already keeps its own definition: its admin's. Classes are made
// once and kept (they are cluster-wide, and cost nothing idle).

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
// The system classes exist everywhere.
func (p *Provider) ensurePriorityClass(ctx context.Context, pod *corev1.Pod) error {
	name := pod.Spec.PriorityClassName
	if name == "" || strings.HasPrefix(name, "system-") || pod.Spec.Priority == nil {
		return nil
	}
	if _, ok := p.priorityClasses.Load(name); ok {
		return nil
	}
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: classLabels()},
		Value:       *pod.Spec.Priority,
		Description: fmt.Sprintf("copied by Nestlet from cluster %s, where pod %s/%s names it", p.cfg.ParentName, pod.Namespace, pod.Name),
	}
	if pod.Spec.PreemptionPolicy != nil {
		pc.PreemptionPolicy = ptr.To(*pod.Spec.PreemptionPolicy)
	}
	_, err := p.cfg.Child.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{FieldManager: api.FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	p.priorityClasses.Store(name, true)
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
