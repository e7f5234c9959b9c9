package summary

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nestlet/nestlet/api"
)

const (
	regionKey = "topology.kubernetes.io/region"
	zoneKey   = "topology.kubernetes.io/zone"
)

// leafSummary computes the summary of a leaf cluster with n real nodes of
// 4 CPUs, in region and zone, as its agent reports it.
func leafSummary(name, region, zone string, n int) api.Summary {
	var nodes []*corev1.Node
	for i := range n {
		nodes = append(nodes, newNode(fmt.Sprintf("%s-%d", name, i), rl("cpu", "4", "memory", "16Gi", "pods", "110"),
			withLabels(regionKey, region, zoneKey, zone, "kubernetes.io/arch", "amd64", "kubernetes.io/os", "linux")))
	}
	return Compute(Input{Cluster: name, Parent: "p", Nodes: nodes, Now: time.Unix(0, 0)}).Summary
}

// mid computes the summary of cluster name over children's summaries.
func mid(t *testing.T, name string, children []api.Summary) api.Summary {
	var nodes []*corev1.Node
	for _, c := range children {
		nodes = append(nodes, newNode(c.Cluster, rl("cpu", "1"), virtualOf(t, c)))
	}
	return Compute(Input{Cluster: name, Parent: "above-" + name, Nodes: nodes, Now: time.Unix(0, 0)}).Summary
}

func jsonSize(t *testing.T, s api.Summary) int {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return len(b)
}

// totals sums the nodes and free CPU (millicores) of the groups of s that
// match: a label value listed, or in Others for a folded key.
func totals(s api.Summary, match func(api.Group) int) (nodes int, cpu int64) {
	for _, g := range s.Groups {
		n := match(g)
		nodes += n
		if n > 0 {
			q := g.Free[corev1.ResourceCPU]
			cpu += q.MilliValue()
		}
	}
	return nodes, cpu
}

// inRegion counts the nodes of g in region r.
func inRegion(r string) func(api.Group) int {
	return func(g api.Group) int {
		if g.Labels[regionKey] == r {
			return g.Nodes
		}
		return g.Values[regionKey][r]
	}
}

// The fleet of the scale issue: 10 fields of 100 leaves of 10 nodes, one
// zone per leaf. Every summary stays within the bound; totals and regions
// are exact at the root, which folds the zones into counts.
func TestBoundFleet(t *testing.T) {
	var fields []api.Summary
	for f := range 10 {
		var leaves []api.Summary
		for l := range 100 {
			leaf := leafSummary(fmt.Sprintf("leaf-%d-%d", f, l), fmt.Sprintf("region-%d", f%5), fmt.Sprintf("zone-%d-%d", f, l), 10)
			require.LessOrEqual(t, jsonSize(t, leaf), api.MaxSummaryBytes)
			leaves = append(leaves, leaf)
		}
		field := mid(t, fmt.Sprintf("field-%d", f), leaves)
		size := jsonSize(t, field)
		require.LessOrEqual(t, size, api.MaxSummaryBytes, "field %d", f)
		if f == 0 {
			t.Logf("a field over 100 leaves: %d bytes, %d groups", size, len(field.Groups))
		}
		assert.Equal(t, 101, field.Clusters)
		assert.Equal(t, []string{fmt.Sprintf("field-%d", f)}, field.Branches, "leaves with one parent are no branch")
		fields = append(fields, field)
	}
	root := mid(t, "root", fields)
	size := jsonSize(t, root)
	t.Logf("the root over 10 fields: %d bytes, %d groups", size, len(root.Groups))
	require.LessOrEqual(t, size, api.MaxSummaryBytes)
	assert.Equal(t, 1011, root.Clusters)
	assert.Nil(t, root.Covered, "1,011 names do not fit")
	allNodes, allCPU := totals(root, func(g api.Group) int { return g.Nodes })
	assert.Equal(t, 10_000, allNodes)
	assert.Equal(t, int64(40_000_000), allCPU)
	for r := range 5 {
		nodes, cpu := totals(root, inRegion(fmt.Sprintf("region-%d", r)))
		assert.Equal(t, 2_000, nodes, "region-%d", r)
		assert.Equal(t, int64(8_000_000), cpu, "region-%d", r)
	}
	// Every zone is either listed with its 10 nodes or counted in Others.
	listed, others := 0, 0
	for _, g := range root.Groups {
		for _, n := range g.Values[zoneKey] {
			listed += n
		}
		others += g.Others[zoneKey]
	}
	assert.Equal(t, 10_000, listed+others)
}

// Whatever the labels (every node its own long values, many taints), the
// bound holds and the node count is exact.
func TestBoundAdversarial(t *testing.T) {
	long := func(prefix string, i int) string { return fmt.Sprintf("%s-%s-%d", prefix, strings.Repeat("x", 50), i) }
	keys := append([]string{}, api.DefaultGroupKeys...)
	var nodes []*corev1.Node
	for i := range 2000 {
		n := newNode(fmt.Sprintf("n%d", i), rl("cpu", "2", "memory", "1Gi", "example.com/gpu", "1"))
		for _, k := range keys {
			n.Labels[k] = long(k[strings.LastIndex(k, "/")+1:], i)
		}
		n.Spec.Taints = []corev1.Taint{taint(long("example.com/t", i%40), long("v", i), corev1.TaintEffectNoSchedule)}
		nodes = append(nodes, n)
	}
	s := Compute(Input{Cluster: "c", Nodes: nodes, Now: time.Unix(0, 0)}).Summary
	size := jsonSize(t, s)
	t.Logf("2,000 nodes, all values distinct and long, 40 taint keys: %d bytes, %d groups", size, len(s.Groups))
	require.LessOrEqual(t, size, api.MaxSummaryBytes)
	n, cpu := totals(s, func(g api.Group) int { return g.Nodes })
	assert.Equal(t, 2000, n)
	assert.Equal(t, int64(4_000_000), cpu)
}

// A summary under the bound is left as it was: the bound changes nothing
// for the clusters of the scheduler's tests and of the e2e trees.
func TestBoundLeavesSmallSummaries(t *testing.T) {
	var leaves []api.Summary
	for l := range 8 {
		leaves = append(leaves, leafSummary(fmt.Sprintf("leaf-%d", l), "west", fmt.Sprintf("zone-%d", l), 3))
	}
	s := mid(t, "field", leaves)
	require.Len(t, s.Groups, 8, "one group per zone")
	for _, g := range s.Groups {
		assert.Nil(t, g.Values)
		assert.Nil(t, g.Others)
		assert.Equal(t, 3, g.Nodes)
	}
	assert.Len(t, s.Covered, 9)
}

// Many branch clusters go into a Bloom filter: every one of them is still
// found (split horizon holds), and few others are mistaken for one.
func TestBranchFilter(t *testing.T) {
	var children []api.Summary
	for i := range 300 {
		// Each child has children of its own, so it is a branch.
		c := api.Summary{Version: api.SummaryVersion, Cluster: fmt.Sprintf("mid-cluster-%03d", i), Clusters: 2,
			Branches: []string{fmt.Sprintf("mid-cluster-%03d", i)}}
		children = append(children, c)
	}
	s := mid(t, "top", children)
	require.Nil(t, s.Branches)
	require.NotEmpty(t, s.BranchFilter)
	assert.Equal(t, 601, s.Clusters)
	for _, c := range children {
		assert.True(t, s.Covers(c.Cluster), c.Cluster)
	}
	assert.True(t, s.Covers("top"))
	wrong := 0
	for i := range 10_000 {
		if s.Covers(fmt.Sprintf("elsewhere-%d", i)) {
			wrong++
		}
	}
	t.Logf("false positives: %d in 10,000", wrong)
	assert.Less(t, wrong, 10)

	// One level up, the filter still cuts a cycle: a cluster whose child
	// covers it through the filter does not count that child.
	parent := newNode("top", rl("cpu", "1"), virtualOf(t, s))
	other := newNode("x", rl("cpu", "1"), virtualOf(t, api.Summary{Version: api.SummaryVersion, Cluster: "x", Covered: []string{"x"}, Clusters: 1,
		Groups: []api.Group{{Nodes: 1, Allocatable: rl("cpu", "1"), Free: rl("cpu", "1")}}}))
	r := Compute(Input{Cluster: "c", Parent: "mid-cluster-007", Nodes: []*corev1.Node{parent, other}, Now: time.Unix(0, 0)})
	assert.Equal(t, 2, r.Summary.Clusters, "top covers the parent: split horizon")
	assert.True(t, r.Allocatable.Cpu().Equal(resource.MustParse("1")))
}

// A parent folds again what its children folded already, and its children
// may have folded different keys: every node is still counted once per key
// (nodes in Others are not counted twice), and the summary stays within the
// bound (the groups that differ only by which keys a child folded merge).
func TestBoundRefoldsAcrossLevels(t *testing.T) {
	alloc := func() corev1.ResourceList {
		return rl("cpu", "16", "memory", "64Gi", "pods", "110", "ephemeral-storage", "100Gi",
			"hugepages-2Mi", "0", "hugepages-1Gi", "0", "nvidia.com/gpu", "8")
	}
	// nodes returns n nodes named prefix-i with labels(i).
	nodes := func(prefix string, n int, labels func(i int) []string) []*corev1.Node {
		var out []*corev1.Node
		for i := range n {
			out = append(out, newNode(fmt.Sprintf("%s-%d", prefix, i), alloc(), withLabels(labels(i)...)))
		}
		return out
	}
	tests := []struct {
		name string
		// leaves are the nodes of the parent's children, one cluster each;
		// own are the parent's own nodes.
		leaves [][]*corev1.Node
		own    []*corev1.Node
	}{
		{
			name: "a key a child folded, nodes without it counted in Others, is folded again",
			// The child folds zone: its zoneless nodes in region b make a
			// group with only Others. The parent's own 60 zones fold zone again.
			leaves: [][]*corev1.Node{append(
				nodes("x-a", 80, func(i int) []string { return []string{regionKey, "a", zoneKey, fmt.Sprintf("zone-a-%d", i)} }),
				nodes("x-b", 2, func(int) []string { return []string{regionKey, "b"} })...)},
			own: nodes("p", 60, func(i int) []string { return []string{regionKey, "c", zoneKey, fmt.Sprintf("zone-c-%d", i)} }),
		},
		{
			name: "children folded different keys and lack the others",
			// Child m carries the group keys of the bits of m, a value per
			// node, so it folds all of them; no key is a label at the parent.
			leaves: func() [][]*corev1.Node {
				var out [][]*corev1.Node
				for m := range 1 << len(api.DefaultGroupKeys) {
					out = append(out, nodes(fmt.Sprintf("leaf-%d", m), 40, func(i int) []string {
						var kv []string
						for b, k := range api.DefaultGroupKeys {
							if m&(1<<b) != 0 {
								kv = append(kv, k, fmt.Sprintf("v-%d-%d", m, i))
							}
						}
						return kv
					}))
				}
				return out
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := slices.Clone(tt.own)
			var truth []simNode
			for _, n := range tt.own {
				truth = append(truth, truthOf(n, nil))
			}
			for i, leaf := range tt.leaves {
				r := Compute(Input{Cluster: fmt.Sprintf("leaf-%d", i), Parent: "p", Nodes: leaf, Now: time.Unix(0, 0)})
				var leafTruth []simNode
				for _, n := range leaf {
					leafTruth = append(leafTruth, truthOf(n, nil))
				}
				requireFaithful(t, r.Summary, leafTruth)
				all = append(all, newNode(r.Summary.Cluster, r.Allocatable, virtualOf(t, r.Summary)))
				truth = append(truth, leafTruth...)
			}
			p := Compute(Input{Cluster: "p", Nodes: all, Now: time.Unix(0, 0)}).Summary
			t.Logf("the parent: %d bytes, %d groups", jsonSize(t, p), len(p.Groups))
			requireFaithful(t, p, truth)
		})
	}
}
