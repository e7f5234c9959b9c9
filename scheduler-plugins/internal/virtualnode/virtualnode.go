// Package virtualnode holds what the Nestlet scheduler plugins share about
// virtual nodes: recognising them, reading their summary, and matching a
// pod against a summary group as if the group were a node.
package virtualnode

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
)

// Cluster returns the child cluster a node stands for, "" for a real node.
func Cluster(node *corev1.Node) string {
	if node == nil {
		return ""
	}
	return node.Labels[api.LabelCluster]
}

// IsVirtual reports whether node is a Nestlet virtual node.
func IsVirtual(node *corev1.Node) bool { return Cluster(node) != "" }

// Summary returns the node's summary, if it has a readable one.
func Summary(node *corev1.Node) (*api.Summary, bool) { return api.ParseSummary(node) }

// IsDaemonSetPod reports whether a DaemonSet controls the pod.
func IsDaemonSetPod(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "DaemonSet"
}

// IsProviderTaint reports whether t is the taint every virtual node carries.
func IsProviderTaint(t *corev1.Taint) bool { return t.Key == api.TaintKeyProvider }

// UntoleratedTaint returns a NoSchedule/NoExecute taint among taints the pod
// does not tolerate, ignoring the virtual-node taint when skipProvider.
func UntoleratedTaint(pod *corev1.Pod, taints []corev1.Taint, skipProvider bool) (corev1.Taint, bool) {
	// As the built-in TaintToleration plugin, without the alpha comparison
	// operators.
	return v1helper.FindMatchingUntoleratedTaint(klog.Background(), taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		if skipProvider && IsProviderTaint(t) {
			return false
		}
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
}

// GroupNode is a stand-in node for group g of virtual node n: n's labels
// with g's label values over them, and g's taints.
func GroupNode(n *corev1.Node, g *api.Group) *corev1.Node {
	labels := maps.Clone(n.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, g.Labels)
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels}, Spec: corev1.NodeSpec{Taints: g.Taints}}
}

// GroupMatches reports whether the pod may run on the nodes of group g of
// virtual node n: nodeSelector and required node affinity match the group's
// labels, and the pod tolerates the group's taints.
func GroupMatches(pod *corev1.Pod, n *corev1.Node, g *api.Group, affinity nodeaffinity.RequiredNodeAffinity) bool {
	gn := GroupNode(n, g)
	if ok, _ := affinity.Match(gn); !ok {
		return false
	}
	_, untolerated := UntoleratedTaint(pod, g.Taints, false)
	return !untolerated
}

// AnyGroupMatches reports whether the pod may run on some group of the
// summary.
func AnyGroupMatches(pod *corev1.Pod, n *corev1.Node, s *api.Summary, affinity nodeaffinity.RequiredNodeAffinity) bool {
	for i := range s.Groups {
		if GroupMatches(pod, n, &s.Groups[i], affinity) {
			return true
		}
	}
	return false
}

// MatchingGroups returns the groups of a virtual node's summary the pod may
// run on.
func MatchingGroups(pod *corev1.Pod, n *corev1.Node, s *api.Summary) []*api.Group {
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	var out []*api.Group
	for i := range s.Groups {
		if GroupMatches(pod, n, &s.Groups[i], affinity) {
			out = append(out, &s.Groups[i])
		}
	}
	return out
}

// DescribeSelector says in a few words what the pod asks of nodes, for
// messages such as "east: no group matches region=north".
func DescribeSelector(pod *corev1.Pod) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(pod.Spec.NodeSelector)) {
		parts = append(parts, strings.TrimPrefix(k, "topology.kubernetes.io/")+"="+pod.Spec.NodeSelector[k])
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		parts = append(parts, "the pod's required node affinity")
	}
	if len(parts) == 0 {
		return "the pod's tolerations"
	}
	return strings.Join(parts, ", ")
}

// AvoidedUntil returns until when the virtual node asks not to be given the
// pods of the pod's original controller (after one of them bounced back),
// if now is before that.
func AvoidedUntil(n *corev1.Node, pod *corev1.Pod, now time.Time) (time.Time, bool) {
	owner := api.PodOwnerUID(pod)
	raw := n.Annotations[api.AnnotationAvoid]
	if owner == "" || raw == "" {
		return time.Time{}, false
	}
	until, err := avoidList(raw)
	if err != nil {
		return time.Time{}, false
	}
	t, ok := until[string(owner)]
	if !ok || !now.Before(t) {
		return time.Time{}, false
	}
	return t, true
}

func avoidList(raw string) (map[string]time.Time, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", api.AnnotationAvoid, err)
	}
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			continue
		}
		out[k] = t
	}
	return out, nil
}
