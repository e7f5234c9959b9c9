package summary

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nestlet/nestlet/api"
)

// counted is a node that counts toward the report. summary is nil for a
// real node and the node's parsed summary for a virtual one.
type counted struct {
	node    *corev1.Node
	summary *api.Summary
}

// load is what the counted pods request.
type load struct {
	// perNode holds the requests of every counted pod, by node name.
	perNode map[string]corev1.ResourceList
	// foreign sums the requests of the counted pods the parent did not send.
	foreign corev1.ResourceList
}

// countNodes returns the nodes that count, in input order: Ready and not
// cordoned, and for a virtual node, with a summary that parses and does not
// cover parent (split horizon). A node name seen twice counts once.
func countNodes(nodes []*corev1.Node, parent string) []counted {
	var out []counted
	seen := map[string]bool{}
	for _, n := range nodes {
		if n == nil || seen[n.Name] || !schedulable(n) {
			continue
		}
		c, ok := classify(n, parent)
		if !ok {
			continue
		}
		seen[n.Name] = true
		out = append(out, c)
	}
	return out
}

// classify tells a real node from a virtual one, and whether it counts.
func classify(n *corev1.Node, parent string) (counted, bool) {
	if _, virtual := n.Annotations[api.AnnotationSummary]; !virtual {
		return counted{node: n}, true
	}
	s, ok := api.ParseSummary(n)
	if !ok || (parent != "" && s.Covers(parent)) {
		return counted{}, false
	}
	return counted{node: n, summary: s}, true
}

// schedulable reports whether n is Ready and not cordoned.
func schedulable(n *corev1.Node) bool {
	return !n.Spec.Unschedulable && NodeReady(n)
}

// NodeReady reports whether n's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// countPods sums the requests of the pods that count: bound to a counted
// node and neither Succeeded nor Failed.
func countPods(pods []*corev1.Pod, nodes []counted, parent string) load {
	l := load{perNode: map[string]corev1.ResourceList{}, foreign: corev1.ResourceList{}}
	for _, c := range nodes {
		l.perNode[c.node.Name] = corev1.ResourceList{}
	}
	for _, p := range pods {
		if p == nil || !active(p) {
			continue
		}
		used, ok := l.perNode[p.Spec.NodeName]
		if !ok {
			continue
		}
		reqs := PodRequests(p)
		AddTo(used, reqs)
		if !sentBy(p, parent) {
			AddTo(l.foreign, reqs)
		}
	}
	return l
}

// active reports whether p still holds its resources.
func active(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// sentBy reports whether parent sent p, as told by its origin annotation.
func sentBy(p *corev1.Pod, parent string) bool {
	return parent != "" && strings.HasPrefix(p.Annotations[api.AnnotationOrigin], parent+"/")
}

// PodRequests returns what p requests as the scheduler counts it (init and
// sidecar containers, pod-level resources, overhead), plus one "pods".
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	if p.Spec.Overhead != nil && resourcehelper.IsPodLevelRequestsSet(p) {
		// PodRequests adds the overhead in place to quantities it copies
		// shallowly from the pod-level requests: work on a copy so the
		// input pod is never mutated.
		p = p.DeepCopy()
	}
	reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	AddTo(reqs, corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)})
	return reqs
}

// allocatable is the sum of the counted nodes' allocatable minus the
// requests of the counted pods the parent did not send, clamped at zero.
func allocatable(nodes []counted, l load, share int) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range nodes {
		AddTo(total, c.node.Status.Allocatable)
	}
	if share >= 100 {
		return subClamped(total, l.foreign)
	}
	// The parent's own pods, plus its share of what is free: the parent's
	// bookkeeping subtracts its pods, and sees share% of the free capacity.
	used := corev1.ResourceList{}
	for _, u := range l.perNode {
		AddTo(used, u)
	}
	out := scale(subClamped(total, used), share)
	AddTo(out, subClamped(used, l.foreign))
	return out
}
