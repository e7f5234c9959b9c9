// Package namespacepolicy is the NamespacePolicy scheduler plugin: a
// cluster's operator says, per namespace, which of its children the
// namespace's pods may go to (annotation nestlet.io/clusters, a label
// selector over the virtual nodes, or "none"), whatever the pods' own
// specs ask; the system namespaces' pods stay in the cluster unless their
// namespace says otherwise. Real nodes always pass.
package namespacepolicy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config/validation"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/pluginargs"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "NamespacePolicy"

// stateKey holds a pod's policy from PreFilter to Filter.
const stateKey fwk.StateKey = Name

// NamespacePolicy implements fwk.PreFilterPlugin and fwk.FilterPlugin.
type NamespacePolicy struct {
	namespaces corelisters.NamespaceLister
	// fallback is the annotation's value for a namespace without it
	// (args defaultClusters); "" for any child.
	fallback string
}

var (
	_ fwk.PreFilterPlugin = &NamespacePolicy{}
	_ fwk.FilterPlugin    = &NamespacePolicy{}
)

// New takes the internal args (apis/config), or their v1 or raw form, and
// validates them; it reads namespaces through the scheduler's informer.
func New(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args := &config.NamespacePolicyArgs{}
	if err := pluginargs.Decode(obj, args); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if err := pluginargs.ValidationError(validation.ValidateNamespacePolicyArgs(nil, args)); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if h == nil || h.SharedInformerFactory() == nil {
		return nil, fmt.Errorf("%s needs the scheduler's informers", Name)
	}
	return &NamespacePolicy{namespaces: h.SharedInformerFactory().Core().V1().Namespaces().Lister(), fallback: args.DefaultClusters}, nil
}

// NewWithLister returns the plugin over namespaces, with the default
// policy fallback (args defaultClusters), for tests.
func NewWithLister(namespaces corelisters.NamespaceLister, fallback string) *NamespacePolicy {
	return &NamespacePolicy{namespaces: namespaces, fallback: fallback}
}

// Name returns the plugin's name.
func (*NamespacePolicy) Name() string { return Name }

// policy is what a pod's namespace allows of the virtual nodes: none
// (refused says why), or those selector matches.
type policy struct {
	selector labels.Selector
	refused  string
}

func (p *policy) Clone() fwk.StateData { return p }

// policyOf returns the policy of namespace ns, fallback standing for the
// annotation it lacks; nil when its pods may go to any child. A selector
// that does not parse keeps them here (fail closed).
func policyOf(ns *corev1.Namespace, fallback string) *policy {
	raw, set := ns.Annotations[api.AnnotationNamespaceClusters]
	switch {
	case !set && api.IsSystemNamespace(ns.Name):
		return &policy{refused: fmt.Sprintf("namespace %s is a system namespace: its pods stay in this cluster (annotation %s on the namespace lets them go)", ns.Name, api.AnnotationNamespaceClusters)}
	case !set && fallback == api.NamespaceClustersNone:
		return &policy{refused: fmt.Sprintf("namespace %s has not opted in: this cluster keeps the pods of a namespace without annotation %s (the scheduler's defaultClusters)", ns.Name, api.AnnotationNamespaceClusters)}
	case !set && fallback == "":
		return nil
	case !set:
		raw = fallback
	case raw == api.NamespaceClustersNone:
		return &policy{refused: fmt.Sprintf("namespace %s keeps its pods in this cluster (annotation %s=%s)", ns.Name, api.AnnotationNamespaceClusters, raw)}
	}
	sel, err := labels.Parse(raw)
	if err != nil {
		return &policy{refused: fmt.Sprintf("namespace %s's annotation %s=%q is not a label selector (%v): its pods stay in this cluster until it is fixed", ns.Name, api.AnnotationNamespaceClusters, raw, err)}
	}
	return &policy{selector: sel}
}

// PreFilter reads the policy of the pod's namespace; a pod free to go
// anywhere skips Filter.
func (pl *NamespacePolicy) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	ns, err := pl.namespaces.Get(pod.Namespace)
	if apierrors.IsNotFound(err) {
		// Not in the informer yet: judged by its name alone.
		ns, err = &corev1.Namespace{}, nil
		ns.Name = pod.Namespace
	}
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("reading namespace %s: %w", pod.Namespace, err))
	}
	p := policyOf(ns, pl.fallback)
	if p == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(stateKey, p)
	return nil, nil
}

// PreFilterExtensions returns nil: adding or removing pods changes nothing.
func (*NamespacePolicy) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter refuses the virtual nodes the pod's namespace does not allow.
func (pl *NamespacePolicy) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	if !virtualnode.IsVirtual(node) {
		return nil
	}
	data, err := state.Read(stateKey)
	if err != nil {
		return nil // PreFilter skipped us: no policy
	}
	p := data.(*policy)
	switch {
	case p.refused != "":
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: %s", node.Name, p.refused))
	case !p.selector.Matches(labels.Set(node.Labels)):
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("%s: the pod's namespace sends its pods only to clusters matching %s (annotation %s)", node.Name, p.selector, api.AnnotationNamespaceClusters))
	}
	return nil
}
