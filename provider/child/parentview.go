package child

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/nestlet/nestlet/api"
)

// parentView is what the parent says of this cluster on its virtual node,
// as conditions of the Target: whether the two builds meet (Compatible,
// compatibility.go) and what it found of this cluster's pod CIDRs
// (PodCIDRsDistinct, PodCIDRsGranted: podcidrs.go). It reads them from the
// versions of the node the run's watch sees (watchOwnNode), once the
// parent's agent has decorated it, and writes them when they change. The
// run's Ready write carries the first of them: a join costs one status
// write, not one per condition.
type parentView struct {
	// set writes conditions to the Target (runStatus.set).
	set      func(context.Context, ...metav1.Condition)
	podCIDRs func() ([]string, error)
	// decorated is closed when the first decorated version is seen.
	decorated chan struct{}

	mu sync.Mutex
	// node is the last decorated version seen; labels and taints the last
	// version's, decorated or not.
	node        *corev1.Node
	labels      map[string]string
	taints      []corev1.Taint
	allocatable corev1.ResourceList
	// live is set once the Ready write took the conditions: changes are
	// written from then on.
	live    bool
	written []metav1.Condition
}

func newParentView(set func(context.Context, ...metav1.Condition), podCIDRs func() ([]string, error)) *parentView {
	return &parentView{set: set, podCIDRs: podCIDRs, decorated: make(chan struct{})}
}

// decoratedByParent reports whether the parent's agent has decorated n: it
// records the taints it applied on every child's node, with its build and
// its verdict on the node's pod CIDRs.
func decoratedByParent(n *corev1.Node) bool {
	_, ok := n.Annotations[api.AnnotationAppliedTaints]
	return ok
}

// observe takes a version of the node (watchOwnNode's onNode).
func (v *parentView) observe(ctx context.Context, n *corev1.Node) {
	v.mu.Lock()
	v.labels, v.taints, v.allocatable = n.Labels, n.Spec.Taints, n.Status.Allocatable
	v.mu.Unlock()
	if !decoratedByParent(n) {
		return
	}
	v.mu.Lock()
	first := v.node == nil
	v.node = n
	v.mu.Unlock()
	if first {
		close(v.decorated)
	}
	v.write(ctx)
}

// write writes the conditions if they changed since the last write (this
// cluster's pod CIDRs may change without the node), once live.
func (v *parentView) write(ctx context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock() // writes in order: an older view never lands last
	if !v.live {
		return
	}
	conds := v.conditions()
	if len(conds) == 0 || slices.EqualFunc(conds, v.written, sameCondition) {
		return
	}
	v.written = conds
	v.set(ctx, conds...)
}

// withReady runs ready, the run's Ready write, with the view's conditions
// (none before the parent decorated the node), and makes the view live.
func (v *parentView) withReady(ready func(conds ...metav1.Condition)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live = true
	v.written = v.conditions()
	ready(v.written...)
}

// conditions are the view's conditions from the last decorated node, nil
// before there is one. v.mu is held.
func (v *parentView) conditions() []metav1.Condition {
	if v.node == nil {
		return nil
	}
	conds := []metav1.Condition{compatibility(v.node)}
	if own, err := v.podCIDRs(); err == nil {
		conds = append(conds, podCIDRConditions(own, v.node)...)
	}
	return conds
}

func sameCondition(a, b metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

// nodeLabels returns the labels of the last version of the node seen in
// the parent (nil before the first); the map is not to be changed.
func (v *parentView) nodeLabels() map[string]string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.labels
}

// nodeTaints returns the taints of the last version of the node seen in
// the parent (nil before the first); the slice is not to be changed.
func (v *parentView) nodeTaints() []corev1.Taint {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.taints
}

// nodeAllocatable returns the allocatable of the last version of the node
// seen in the parent (nil before the first); not to be changed.
func (v *parentView) nodeAllocatable() corev1.ResourceList {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.allocatable
}

// resourceBelow reports whether some node of this cluster (a child's
// virtual node holds its subtree's) has resource r; when it cannot tell,
// it says so (the request stays on the delegate).
func resourceBelow(nodes corelisters.NodeLister) func(r corev1.ResourceName) bool {
	return func(r corev1.ResourceName) bool {
		list, err := nodes.List(labels.Everything())
		if err != nil {
			return true
		}
		for _, n := range list {
			if _, ok := n.Status.Allocatable[r]; ok {
				return true
			}
		}
		return false
	}
}

// carriedBelow reports whether some node of this cluster carries label
// key, or a child's subtree does by its summary: when it cannot tell, it
// says so (the requirement stays on the delegate).
func carriedBelow(nodes corelisters.NodeLister) func(key string) bool {
	return func(key string) bool {
		list, err := nodes.List(labels.Everything())
		if err != nil {
			return true
		}
		for _, n := range list {
			if _, ok := n.Labels[key]; ok {
				return true
			}
			s, ok := api.ParseSummary(n)
			if !ok {
				continue
			}
			for _, g := range s.Groups {
				_, labelled := g.Labels[key]
				_, folded := g.Values[key]
				if labelled || folded {
					return true
				}
			}
		}
		return false
	}
}
