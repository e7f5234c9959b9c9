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
	fwk "k8s.io/kube-scheduler/framework"

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
// with g's label values over them, and g's taints. A group with folded keys
// (api.Group.Values) stands for several label sets: see GroupMatches.
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
// labels, and the pod tolerates the group's taints. For a key folded to
// keep the summary small, some node of the group matches if one of its
// listed values does, or, when the group has nodes whose value is not
// listed, if a value the pod names or no value at all would.
func GroupMatches(pod *corev1.Pod, n *corev1.Node, g *api.Group, affinity nodeaffinity.RequiredNodeAffinity) bool {
	if _, untolerated := UntoleratedTaint(pod, g.Taints, false); untolerated {
		return false
	}
	gn := GroupNode(n, g)
	folded := g.FoldedKeys()
	if len(folded) == 0 {
		ok, _ := affinity.Match(gn)
		return ok
	}
	choices := make([][]*string, len(folded))
	combos := 1
	for i, k := range folded {
		choices[i] = candidates(pod, g, k)
		if len(choices[i]) == 0 {
			// A folded key that counts no node (a malformed summary):
			// nothing there to match.
			return false
		}
		combos *= len(choices[i])
		if combos > maxCombinations {
			// Too many to try: no match. Failing open would let a
			// child's summary attract pods its nodes may not match.
			return false
		}
	}
	idx := make([]int, len(folded))
	for {
		for i, k := range folded {
			if v := choices[i][idx[i]]; v != nil {
				gn.Labels[k] = *v
			} else {
				delete(gn.Labels, k)
			}
		}
		if ok, _ := affinity.Match(gn); ok {
			return true
		}
		i := 0
		for ; i < len(idx); i++ {
			idx[i]++
			if idx[i] < len(choices[i]) {
				break
			}
			idx[i] = 0
		}
		if i == len(idx) {
			return false
		}
	}
}

// maxCombinations bounds the label sets GroupMatches tries.
const maxCombinations = 256

// candidates are the values of folded key k worth trying for the pod (nil
// stands for a node without the key). A value the pod does not name
// matches or fails like any other it does not name, so one of them
// stands for all, unless the pod compares numbers (Gt, Lt).
func candidates(pod *corev1.Pod, g *api.Group, k string) []*string {
	named, numeric := namedValues(pod, k)
	var out []*string
	var other *string
	for _, v := range slices.Sorted(maps.Keys(g.Values[k])) {
		if g.Values[k][v] <= 0 {
			continue
		}
		switch {
		case numeric || named[v]:
			out = append(out, &v)
		case other == nil:
			other = &v
		}
	}
	if other != nil {
		out = append(out, other)
	}
	if g.Others[k] > 0 {
		for _, v := range slices.Sorted(maps.Keys(named)) {
			if _, listed := g.Values[k][v]; !listed {
				out = append(out, &v)
			}
		}
		// Unlisted values the pod does not name, and nodes without the
		// key: tried as a value nobody names, and as no value.
		unnamed := "\x00not-named"
		out = append(out, &unnamed, nil)
	}
	return out
}

// namedValues are the values of label key k the pod's node selector and
// required node affinity name, and whether they compare k as a number.
func namedValues(pod *corev1.Pod, k string) (map[string]bool, bool) {
	named := map[string]bool{}
	numeric := false
	if v, ok := pod.Spec.NodeSelector[k]; ok {
		named[v] = true
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				if e.Key != k {
					continue
				}
				for _, v := range e.Values {
					named[v] = true
				}
				if e.Operator == corev1.NodeSelectorOpGt || e.Operator == corev1.NodeSelectorOpLt {
					numeric = true
				}
			}
		}
	}
	return named, numeric
}

// MatchingGroups returns the groups of a virtual node's summary s the pod
// may run on. The answer is kept with the summary for the pods of the same
// node constraints (cache.go): shared, read it, never write it.
func MatchingGroups(pod *corev1.Pod, n *corev1.Node, s *api.Summary) []*api.Group {
	return matching(pod, n, s)
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
	raw, _ := api.ChildAnnotation(n, api.AnnotationAvoid)
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

// DomainsStateKey is the CycleState key under which TreeSpread leaves the
// domains it chose inside a child (ChosenDomains), for Reservation to send
// them with the pod when it asks the child for a place.
const DomainsStateKey = "nestlet.io/chosen-domains"

// ChosenDomains are the topology domains chosen inside a child.
type ChosenDomains map[string]string

// Clone implements the scheduler framework's StateData.
func (d ChosenDomains) Clone() fwk.StateData { return maps.Clone(d) }
