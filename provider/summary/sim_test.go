package summary

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nestlet/nestlet/api"
)

// A simulated fleet for the tests of the bound: leaf clusters with random
// labels, sizes and load, built into trees of clusters whose summaries are
// computed as the agents compute them (Compute over the children's virtual
// nodes), and checked against what the leaves hold.

var seedFlag = flag.Uint64("seed", 0, "run the random fleet tests with this seed only (as logged by a failed run)")

// seeds are the seeds of the random fleet tests: fixed ones and a fresh
// one each run, or only -seed when given. Each test logs its seed.
func seeds() []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	return []uint64{1, 2, 3, rand.Uint64()}
}

// fleetMix is the label mix of a fleet, drawn per seed.
type fleetMix struct {
	regions, zones, types int     // values per key; zones 0: one zone per leaf
	long                  bool    // values of ~60 characters
	missing, tainted      float64 // chance that a node lacks a key, has a taint
}

func randomMix(r *rand.Rand) fleetMix {
	return fleetMix{regions: 1 + r.IntN(8), zones: r.IntN(4), types: 1 + r.IntN(60),
		long: r.IntN(4) == 0, missing: r.Float64() / 10, tainted: r.Float64() / 3}
}

// simNode is what a leaf's node holds, worked out without the package:
// its group-key labels, its taints, and its allocatable and free amounts
// (CPU in millicores, others in units).
type simNode struct {
	labels      map[string]string
	taints      []corev1.Taint
	alloc, free map[corev1.ResourceName]int64
}

// simCluster is a cluster of a simulated tree: a leaf with real nodes, or
// a mid cluster over its children.
type simCluster struct {
	name     string
	nodes    []*corev1.Node
	pods     []*corev1.Pod
	truth    []simNode
	children []*simCluster
}

var simTaints = []corev1.Taint{
	taint("example.com/dedicated", "batch", corev1.TaintEffectNoSchedule),
	taint("example.com/gpu", "", corev1.TaintEffectNoExecute),
	taint("example.com/spot", "true", corev1.TaintEffectPreferNoSchedule),
}

// randomLeaves returns n leaf clusters of 1 to 3 nodes (up to 8 in small
// fleets) labelled after mix, with pods on them, some over-committed.
func randomLeaves(r *rand.Rand, mix fleetMix, n int) []*simCluster {
	value := func(prefix string, i int) string {
		if mix.long {
			return fmt.Sprintf("%s-%s-%d", prefix, strings.Repeat("v", 50), i)
		}
		return fmt.Sprintf("%s-%d", prefix, i)
	}
	maxNodes := 3
	if n <= 10 {
		maxNodes = 8
	}
	leaves := make([]*simCluster, n)
	for l := range leaves {
		c := &simCluster{name: fmt.Sprintf("leaf-%05d", l)}
		region := r.IntN(mix.regions)
		for i := range 1 + r.IntN(maxNodes) {
			labels := map[string]string{
				regionKey:                          value("region", region),
				zoneKey:                            value(fmt.Sprintf("zone-%d", region), r.IntN(max(mix.zones, 1))),
				corev1.LabelArchStable:             []string{"amd64", "arm64"}[r.IntN(2)],
				corev1.LabelOSStable:               []string{"linux", "windows"}[r.IntN(2)],
				corev1.LabelInstanceTypeStable:     value("type", r.IntN(mix.types)),
				"example.com/team-not-a-group-key": fmt.Sprint(r.IntN(100)),
			}
			if mix.zones == 0 {
				labels[zoneKey] = value("zone-of", l)
			}
			for _, k := range api.DefaultGroupKeys {
				if r.Float64() < mix.missing {
					delete(labels, k)
				}
			}
			var taints []corev1.Taint
			if r.Float64() < mix.tainted {
				taints = append(taints, simTaints[r.IntN(len(simTaints))])
			}
			cpu := []int64{2, 4, 8, 16, 32, 64, 96}[r.IntN(7)]
			alloc := rl("cpu", fmt.Sprint(cpu), "memory", fmt.Sprintf("%dGi", cpu*[]int64{2, 4, 8}[r.IntN(3)]), "pods", "110")
			if r.IntN(5) == 0 {
				alloc["nvidia.com/gpu"] = resource.MustParse(fmt.Sprint(1 + r.IntN(8)))
			}
			name := fmt.Sprintf("%s-n%d", c.name, i)
			var nodeOpts []nodeOpt
			for k, v := range labels {
				nodeOpts = append(nodeOpts, withLabels(k, v))
			}
			c.nodes = append(c.nodes, newNode(name, alloc, append(nodeOpts, withTaints(taints...))...))
			for j := range r.IntN(4) {
				reqs := rl("cpu", fmt.Sprintf("%dm", 100+r.Int64N(cpu*600)), "memory", fmt.Sprintf("%dMi", 100+r.Int64N(cpu*1024)))
				c.pods = append(c.pods, newPod(fmt.Sprintf("%s-p%d", name, j), name, reqs))
			}
			c.truth = append(c.truth, truthOf(c.nodes[i], c.pods))
		}
		leaves[l] = c
	}
	return leaves
}

// truthOf works out what node n holds, its pods being among pods (one
// container each, plus one "pods").
func truthOf(n *corev1.Node, pods []*corev1.Pod) simNode {
	s := simNode{labels: map[string]string{}, alloc: map[corev1.ResourceName]int64{}, free: map[corev1.ResourceName]int64{}}
	for _, k := range api.DefaultGroupKeys {
		if v, ok := n.Labels[k]; ok {
			s.labels[k] = v
		}
	}
	s.taints = n.Spec.Taints
	used := map[corev1.ResourceName]int64{}
	for _, p := range pods {
		if p.Spec.NodeName != n.Name {
			continue
		}
		for name, q := range p.Spec.Containers[0].Resources.Requests {
			used[name] += amount(name, q)
		}
		used[corev1.ResourcePods]++
	}
	for name, q := range n.Status.Allocatable {
		s.alloc[name] = amount(name, q)
		s.free[name] = max(s.alloc[name]-used[name], 0)
	}
	return s
}

func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// shape is a simNode's free amounts as a ResourceList, to rank with
// compareShapes.
func (n simNode) shape() corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, v := range n.free {
		if name == corev1.ResourceCPU {
			out[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		} else {
			out[name] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return out
}

// shapeKey is a ResourceList by value, as text.
func shapeKey(l corev1.ResourceList) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		fmt.Fprintf(&b, "%s=%d,", name, amount(name, l[name]))
	}
	return b.String()
}

// leafNodes are the simulated nodes of c's subtree.
func (c *simCluster) leafNodes() []simNode {
	out := slices.Clone(c.truth)
	for _, ch := range c.children {
		out = append(out, ch.leafNodes()...)
	}
	return out
}

// clusters counts the clusters of c's subtree, c included.
func (c *simCluster) clusters() int {
	n := 1
	for _, ch := range c.children {
		n += ch.clusters()
	}
	return n
}

// report computes what c reports to parent, its children's reports first,
// each child standing in c as its virtual node, and calls visit on every
// cluster's result, children first.
func (c *simCluster) report(t *testing.T, parent string, visit func(*simCluster, Result)) Result {
	t.Helper()
	nodes := slices.Clone(c.nodes)
	for _, ch := range c.children {
		r := ch.report(t, c.name, visit)
		n := newNode(ch.name, r.Allocatable, virtualOf(t, r.Summary))
		maps.Copy(n.Labels, r.Labels)
		nodes = append(nodes, n)
	}
	r := Compute(Input{Cluster: c.name, Parent: parent, Nodes: nodes, Pods: c.pods, Now: time.Unix(0, 0)})
	visit(c, r)
	return r
}

// mayHold reads group g as the scheduler does (virtualnode.GroupMatches,
// which this package cannot import) for a pod whose node selector is sel
// and that tolerates the taints tolerated says: every NoSchedule and
// NoExecute taint of g is tolerated, and every key of sel is a label of g
// with that value, or a folded key of g that lists the value or counts
// nodes in Others. GroupMatches also lets through a group with too many
// folded combinations to try, and reads a key the group lacks on the
// virtual node's own labels, so mayHold is, if anything, stricter: what
// it lets through, the scheduler does.
func mayHold(g api.Group, sel map[string]string, tolerated func(corev1.Taint) bool) bool {
	for _, ta := range g.Taints {
		if (ta.Effect == corev1.TaintEffectNoSchedule || ta.Effect == corev1.TaintEffectNoExecute) && !tolerated(ta) {
			return false
		}
	}
	for k, v := range sel {
		if lv, ok := g.Labels[k]; ok {
			if lv != v {
				return false
			}
			continue
		}
		if g.Values[k][v] <= 0 && g.Others[k] <= 0 {
			return false
		}
	}
	return true
}

func tolerateAll(corev1.Taint) bool { return true }

// largestFor is the first-ranked shape (compareShapes) of the groups of s
// that may hold a pod selecting sel and tolerating what tolerated says;
// nil if none may.
func largestFor(s api.Summary, sel map[string]string, tolerated func(corev1.Taint) bool) corev1.ResourceList {
	var best corev1.ResourceList
	for _, g := range s.Groups {
		if len(g.Shapes) > 0 && mayHold(g, sel, tolerated) && (best == nil || compareShapes(g.Shapes[0], best) < 0) {
			best = g.Shapes[0]
		}
	}
	return best
}

// ranksAtLeast reports whether shape a ranks first or with b by value
// (compareShapes, whose last tie-break on the text is left out).
func ranksAtLeast(a, b corev1.ResourceList) bool {
	return compareShapes(a, b) <= 0 || shapeKey(a) == shapeKey(b)
}

// requireFaithful checks summary s against nodes, the real nodes of its
// subtree:
//   - its JSON is within api.MaxSummaryBytes;
//   - nodes, allocatable and free add up exactly, per resource;
//   - per group key, every node is accounted once (a label, a listed
//     value, Others, or no key in an unfolded group), and the nodes
//     listed with a value are at most those that carry it, and at least
//     those less the nodes in Others;
//   - a pod selecting the group-key labels of any node and tolerating
//     its taints may go to some group, and the first shape of the groups
//     it may go to ranks at least as high as the node's free amounts (so
//     it is at least as large for the first resource that differs: CPU,
//     then memory, then the others by name; not larger in every
//     resource);
//   - the same for a pod that selects a single label value and tolerates
//     everything, against the largest free node with that value;
//   - every shape is the free amounts of some node: none is made up.
func requireFaithful(t *testing.T, s api.Summary, nodes []simNode) {
	t.Helper()
	size := jsonSize(t, s)
	require.LessOrEqual(t, size, api.MaxSummaryBytes, "%s: %d nodes, %d groups", s.Cluster, len(nodes), len(s.Groups))

	wantAlloc, wantFree := map[corev1.ResourceName]int64{}, map[corev1.ResourceName]int64{}
	nodeShapes := map[string]bool{} // the free amounts of every node
	for _, n := range nodes {
		for name, v := range n.alloc {
			wantAlloc[name] += v
			wantFree[name] += n.free[name]
		}
		nodeShapes[shapeKey(n.shape())] = true
	}
	gotNodes, gotAlloc, gotFree := 0, map[corev1.ResourceName]int64{}, map[corev1.ResourceName]int64{}
	for _, g := range s.Groups {
		gotNodes += g.Nodes
		for name, q := range g.Allocatable {
			gotAlloc[name] += amount(name, q)
		}
		for name, q := range g.Free {
			gotFree[name] += amount(name, q)
		}
		for _, sh := range g.Shapes {
			require.True(t, nodeShapes[shapeKey(sh)], "%s: shape %v is no node's", s.Cluster, sh)
		}
	}
	require.Equal(t, len(nodes), gotNodes, "%s: nodes", s.Cluster)
	require.Equal(t, wantAlloc, gotAlloc, "%s: allocatable", s.Cluster)
	require.Equal(t, wantFree, gotFree, "%s: free", s.Cluster)

	for _, k := range s.GroupKeys {
		have := map[string]int{} // nodes per value, in the leaves
		for _, n := range nodes {
			if v, ok := n.labels[k]; ok {
				have[v]++
			}
		}
		listed, others, accounted := map[string]int{}, 0, 0
		for _, g := range s.Groups {
			switch v, ok := g.Labels[k]; {
			case ok:
				listed[v] += g.Nodes
				accounted += g.Nodes
			case g.Values[k] != nil || g.Others[k] != 0:
				for v, n := range g.Values[k] {
					listed[v] += n
					accounted += n
				}
				others += g.Others[k]
				accounted += g.Others[k]
			default:
				accounted += g.Nodes
			}
		}
		require.Equal(t, len(nodes), accounted, "%s: nodes accounted for key %s", s.Cluster, k)
		for v, n := range listed {
			require.LessOrEqual(t, n, have[v], "%s: nodes listed with %s=%s", s.Cluster, k, v)
		}
		for v, n := range have {
			require.GreaterOrEqual(t, listed[v]+others, n, "%s: nodes with %s=%s, listed or in Others", s.Cluster, k, v)
		}
	}

	type want struct {
		node  simNode
		shape corev1.ResourceList
	}
	largest := map[string]want{} // per label set and taints, the largest free node
	byValue := map[[2]string]want{}
	for _, n := range nodes {
		sh := n.shape()
		id := groupID(n.labels, n.taints, nil)
		if w, ok := largest[id]; !ok || compareShapes(sh, w.shape) < 0 {
			largest[id] = want{n, sh}
		}
		for k, v := range n.labels {
			if w, ok := byValue[[2]string{k, v}]; !ok || compareShapes(sh, w.shape) < 0 {
				byValue[[2]string{k, v}] = want{n, sh}
			}
		}
	}
	for _, w := range largest {
		got := largestFor(s, w.node.labels, func(ta corev1.Taint) bool { return slices.Contains(w.node.taints, ta) })
		require.NotNil(t, got, "%s: no group may hold a pod for %v tolerating %v", s.Cluster, w.node.labels, w.node.taints)
		require.True(t, ranksAtLeast(got, w.shape), "%s: for %v the largest shape %v ranks below node %v", s.Cluster, w.node.labels, got, w.shape)
	}
	for kv, w := range byValue {
		got := largestFor(s, map[string]string{kv[0]: kv[1]}, tolerateAll)
		require.NotNil(t, got, "%s: no group may hold a pod for %s=%s", s.Cluster, kv[0], kv[1])
		require.True(t, ranksAtLeast(got, w.shape), "%s: for %s=%s the largest shape %v ranks below node %v", s.Cluster, kv[0], kv[1], got, w.shape)
	}
}
