package framework

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A difference of two readings keeps the requests by resource and verb
// (watches included) beside the totals (watches left out); a cluster
// unread in either reading has neither.
func TestCostsSubByKind(t *testing.T) {
	before, after := Costs{}, Costs{}
	for _, c := range []Costs{before, after} {
		c["a"] = ClusterCost{CPU: map[string]time.Duration{}}
		c["b"] = ClusterCost{CPU: map[string]time.Duration{}}
	}
	before.addRequests("a", map[string]float64{"pods-POST": 2, "pods-WATCH": 1})
	after.addRequests("a", map[string]float64{"pods-POST": 5, "pods-WATCH": 3, "pods-GET": 4})
	before.addRequests("b", map[string]float64{"pods-POST": 1})
	after["b"] = ClusterCost{CPU: map[string]time.Duration{}, RequestsUnread: true}

	d := after.Sub(before)
	require.Equal(t, map[string]float64{"pods-POST": 3, "pods-WATCH": 2, "pods-GET": 4}, d["a"].ByKind)
	require.InDelta(t, 7, d["a"].Requests, 0)
	require.InDelta(t, 3, d["a"].Writes, 0)
	require.True(t, d["b"].RequestsUnread)
	require.Nil(t, d["b"].ByKind)
}
