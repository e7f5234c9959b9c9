package framework

import (
	"math"
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

// The sum of some clusters' costs adds each component, kind and total,
// leaves the others out, and is unread if any of them is.
func TestCostsSum(t *testing.T) {
	c := Costs{
		"a": {CPU: map[string]time.Duration{"agent": time.Second, "kwok": 2 * time.Second}, Requests: 3, Writes: 2, ByKind: map[string]float64{"pods-POST": 2}},
		"b": {CPU: map[string]time.Duration{"agent": 3 * time.Second}, Requests: 1, Writes: 1, ByKind: map[string]float64{"pods-POST": 1, "pods-GET": 4}},
		"c": {CPU: map[string]time.Duration{"agent": time.Hour}, Requests: 100, RequestsUnread: true},
	}
	s := c.Sum([]string{"a", "b"})
	require.Equal(t, map[string]time.Duration{"agent": 4 * time.Second, "kwok": 2 * time.Second}, s.CPU)
	require.Equal(t, map[string]float64{"pods-POST": 3, "pods-GET": 4}, s.ByKind)
	require.InDelta(t, 4, s.Requests, 0)
	require.InDelta(t, 3, s.Writes, 0)
	require.False(t, s.RequestsUnread)
	require.True(t, c.Sum([]string{"a", "c"}).RequestsUnread)
}

// The environment counts as quiet once a window's CPU is no longer
// falling: one window alone says nothing, a drop of more than a tenth
// means work left over from before is still ending.
func TestSettled(t *testing.T) {
	require.False(t, settled(nil))
	require.False(t, settled([]float64{0.1}))
	require.False(t, settled([]float64{0.5, 0.3}))
	require.True(t, settled([]float64{0.5, 0.3, 0.28}))
	require.True(t, settled([]float64{0.3, 0.4}))
}

// A histogram's sum and difference keep the buckets; its quantile is the upper
// bound of the bucket that holds it.
func TestHistogramSubQuantile(t *testing.T) {
	inf := math.Inf(1)
	was := Histogram{Sum: 1, Count: 2, Bounds: []float64{0.1, 1, 10, inf}, Counts: []float64{2, 2, 2, 2}}
	now := Histogram{Sum: 31, Count: 12, Bounds: was.Bounds, Counts: []float64{4, 8, 11, 12}}
	d := now.Sub(was)
	require.Equal(t, Histogram{Sum: 30, Count: 10, Bounds: was.Bounds, Counts: []float64{2, 6, 9, 10}}, d)
	require.Equal(t, 1.0, d.Quantile(0.5))
	require.Equal(t, 10.0, d.Quantile(0.9))
	require.Equal(t, inf, d.Quantile(0.99), "past the last bound")
	require.True(t, math.IsNaN(Histogram{}.Quantile(0.5)), "nothing observed")
	require.Equal(t, now, Histogram{}.Add(now), "an empty histogram takes the other's buckets")
	require.Equal(t, Histogram{Sum: 32, Count: 14, Bounds: was.Bounds, Counts: []float64{6, 10, 13, 14}}, now.Add(was))
}
