package virtualnode

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

// SummaryCache keeps the parsed summary of each virtual node, so that an
// annotation is parsed once per report rather than once per pod. The zero
// value is ready to use.
type SummaryCache struct{ m sync.Map } // node name -> cachedSummary

type cachedSummary struct {
	raw string
	s   *api.Summary
	at  time.Time
}

// Get returns the node's summary and its time, parsing the annotation only
// when it changed since the last call.
func (c *SummaryCache) Get(node *corev1.Node) (*api.Summary, time.Time, bool) {
	raw := node.Annotations[api.AnnotationSummary]
	if v, ok := c.m.Load(node.Name); ok {
		if cs := v.(cachedSummary); cs.raw == raw {
			return cs.s, cs.at, cs.s != nil
		}
	}
	s, ok := Summary(node)
	if !ok {
		s = nil
	}
	var at time.Time
	if s != nil {
		at, _ = time.Parse(time.RFC3339, s.Time)
	}
	c.m.Store(node.Name, cachedSummary{raw: raw, s: s, at: at})
	return s, at, s != nil
}
