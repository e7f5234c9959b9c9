package virtualnode

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nestlet/nestlet/api"
)

// SummaryCache keeps the parsed summary of each virtual node, so that an
// annotation is parsed once per report rather than once per pod. Every
// SummaryCache reads one cache shared by the plugins (a summary parsed
// once for them all, and MatchingGroups' answers kept with it). The zero
// value is ready to use.
type SummaryCache struct{}

// summaries is the shared cache: node name -> *cachedSummary.
var summaries sync.Map

type cachedSummary struct {
	raw string
	s   *api.Summary
	at  time.Time

	// matches keeps MatchingGroups' answers for this summary, against
	// the node's labels when they were computed, by the pods' node
	// constraints (constraintsKey).
	mu      sync.Mutex
	labels  map[string]string
	matches map[string][]*api.Group
}

// Get returns the node's summary and its time, parsing the annotation only
// when it changed since the last call.
func (c *SummaryCache) Get(node *corev1.Node) (*api.Summary, time.Time, bool) {
	cs := cached(node)
	return cs.s, cs.at, cs.s != nil
}

func cached(node *corev1.Node) *cachedSummary {
	raw := node.Annotations[api.AnnotationSummary]
	if v, ok := summaries.Load(node.Name); ok {
		if cs := v.(*cachedSummary); cs.raw == raw {
			return cs
		}
	}
	s, ok := Summary(node)
	if !ok {
		s = nil
	}
	cs := &cachedSummary{raw: raw, s: s}
	if s != nil {
		cs.at, _ = time.Parse(time.RFC3339, s.Time)
	}
	summaries.Store(node.Name, cs)
	return cs
}

// maxKeptMatches bounds the answers kept per summary: a summary changes
// at each report, a few node constraints are scheduled meanwhile.
const maxKeptMatches = 256

// matching returns the groups of s (node n's summary, as cached) the pod
// may run on, computing them unless kept.
func matching(pod *corev1.Pod, n *corev1.Node, s *api.Summary) []*api.Group {
	cs := cached(n)
	if cs.s != s || s == nil {
		return matchingGroups(pod, n, s)
	}
	key := constraintsKey(pod)
	cs.mu.Lock()
	if !maps.Equal(cs.labels, n.Labels) {
		cs.labels, cs.matches = maps.Clone(n.Labels), map[string][]*api.Group{}
	}
	out, ok := cs.matches[key]
	cs.mu.Unlock()
	if ok {
		return out
	}
	out = matchingGroups(pod, n, s)
	cs.mu.Lock()
	if len(cs.matches) < maxKeptMatches && maps.Equal(cs.labels, n.Labels) {
		cs.matches[key] = out
	}
	cs.mu.Unlock()
	return out
}

// constraintsKey is the same for two pods whose node constraints are the
// same (node selector, required node affinity, tolerations): they match
// the same groups. Built anew at each call (a pod may change between two
// scheduling cycles), in well under the time of the matching it saves.
func constraintsKey(pod *corev1.Pod) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(pod.Spec.NodeSelector)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(pod.Spec.NodeSelector[k])
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, t := range pod.Spec.Tolerations {
		b.WriteString(t.Key)
		b.WriteByte(0)
		b.WriteString(string(t.Operator))
		b.WriteByte(0)
		b.WriteString(t.Value)
		b.WriteByte(0)
		b.WriteString(string(t.Effect))
		b.WriteByte(0)
	}
	b.WriteByte(1)
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		raw, _ := json.Marshal(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
		b.Write(raw)
	}
	return b.String()
}

// matchingGroups computes MatchingGroups.
func matchingGroups(pod *corev1.Pod, n *corev1.Node, s *api.Summary) []*api.Group {
	if s == nil {
		return nil
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	var out []*api.Group
	for i := range s.Groups {
		if GroupMatches(pod, n, &s.Groups[i], affinity) {
			out = append(out, &s.Groups[i])
		}
	}
	return out
}
