package summary

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

// Merging summaries is commutative and, below the bound, associative: the
// root's groups are the same whatever the tree over the same leaves, but
// for their depth. Once levels bound their summaries, each level loses
// detail its parent cannot recover (which values a capped group listed,
// which taints merged groups had, shapes cut to one), so the root's
// summary depends on the shape; what holds whatever the shape is
// rootFacts, and requireFaithful at every level.

// caterpillar builds leaves into a lopsided tree: each cluster down a
// spine holds a random run of leaves and the next cluster of the spine.
func caterpillar(r *rand.Rand, root string, leaves []*simCluster) *simCluster {
	top := &simCluster{name: root}
	c := top
	for i := 0; len(leaves) > 0; i++ {
		n := min(1+r.IntN(2*len(leaves)/3+1), len(leaves))
		c.children = append(c.children, leaves[:n]...)
		leaves = leaves[n:]
		if len(leaves) > 0 {
			next := &simCluster{name: fmt.Sprintf("%s-spine-%d", root, i)}
			c.children = append(c.children, next)
			c = next
		}
	}
	return top
}

// randomTree builds leaves into a tree of random shape: runs of them go
// under new clusters, recursively, the rest right under the root.
func randomTree(r *rand.Rand, name string, leaves []*simCluster) *simCluster {
	c := &simCluster{name: name}
	for i := 0; len(leaves) > 0; i++ {
		n := min(1+r.IntN(len(leaves)), len(leaves))
		if n < 3 || r.IntN(3) == 0 {
			c.children = append(c.children, leaves[:n]...)
		} else {
			c.children = append(c.children, randomTree(r, fmt.Sprintf("%s-%d", name, i), leaves[:n]))
		}
		leaves = leaves[n:]
	}
	return c
}

func shuffled(r *rand.Rand, leaves []*simCluster) []*simCluster {
	out := slices.Clone(leaves)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// mirrored is a copy of the tree c with the children of every cluster in
// reverse order.
func mirrored(c *simCluster) *simCluster {
	m := *c
	m.children = nil
	for _, ch := range slices.Backward(c.children) {
		m.children = append(m.children, mirrored(ch))
	}
	return &m
}

// shapesOf are the trees the tests build over the same leaves, each from
// its own shuffle of them.
func shapesOf(r *rand.Rand, leaves []*simCluster) []struct {
	name string
	root *simCluster
} {
	return []struct {
		name string
		root *simCluster
	}{
		{"flat", tree("root", shuffled(r, leaves))},
		{"two levels", tree("root", shuffled(r, leaves), 20)},
		{"three levels", tree("root", shuffled(r, leaves), 8, 5)},
		{"caterpillar", caterpillar(r, "root", shuffled(r, leaves))},
		{"random", randomTree(r, "root", shuffled(r, leaves))},
	}
}

// rootFacts is what a root summary says that does not depend on the shape
// of the tree: the nodes, allocatable and free amounts in all; the largest
// free node (the first-ranked shape of all the groups); per group key, the
// nodes accounted for (all of them); the leaf clusters (the clusters
// counted but the root and mid clusters of the shape); the label values a pod may
// select (every one the leaves carry, as mayHold reads the groups).
type rootFacts struct {
	Nodes        int
	Alloc, Free  map[corev1.ResourceName]int64
	Largest      string
	Accounted    map[string]int
	LeafClusters int
	Selectable   map[string][]string
}

// factsOf are the rootFacts of s, the summary of a root over inner clusters
// that are not leaves (itself included), as read for the label values of
// the leaves.
func factsOf(s api.Summary, inner int, values map[string][]string) rootFacts {
	f := rootFacts{Alloc: map[corev1.ResourceName]int64{}, Free: map[corev1.ResourceName]int64{},
		Accounted: map[string]int{}, LeafClusters: s.Clusters - inner, Selectable: map[string][]string{}}
	var largest corev1.ResourceList
	for _, g := range s.Groups {
		f.Nodes += g.Nodes
		for name, q := range g.Allocatable {
			f.Alloc[name] += amount(name, q)
		}
		for name, q := range g.Free {
			f.Free[name] += amount(name, q)
		}
		if largest == nil || compareShapes(g.Shapes[0], largest) < 0 {
			largest = g.Shapes[0]
		}
		for _, k := range s.GroupKeys {
			switch _, ok := g.Labels[k]; {
			case ok || g.Values[k] == nil && g.Others[k] == 0:
				f.Accounted[k] += g.Nodes
			default:
				for _, n := range g.Values[k] {
					f.Accounted[k] += n
				}
				f.Accounted[k] += g.Others[k]
			}
		}
	}
	f.Largest = shapeKey(largest)
	for k, vs := range values {
		for _, v := range vs {
			if largestFor(s, map[string]string{k: v}, tolerateAll) != nil {
				f.Selectable[k] = append(f.Selectable[k], v)
			}
		}
	}
	return f
}

// The same random leaves under five trees (flat, two and three levels, a
// lopsided spine, random): every summary of every tree is within the
// bound and faithful to its leaves, the root's rootFacts are the same for
// all, and mirroring the random tree (children in reverse order) changes
// nothing in its root's summary.
func TestTreeShapes(t *testing.T) {
	for _, seed := range seeds() {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed))
			mix := randomMix(r)
			t.Logf("seed %d (replay: -run TestTreeShapes -args -seed=%d), mix %+v", seed, seed, mix)
			leaves := randomLeaves(r, mix, 400)
			values := map[string][]string{}
			var largest corev1.ResourceList
			nodes := 0
			for _, l := range leaves {
				for _, n := range l.truth {
					nodes++
					for k, v := range n.labels {
						if !slices.Contains(values[k], v) {
							values[k] = append(values[k], v)
						}
					}
					if sh := n.shape(); largest == nil || compareShapes(sh, largest) < 0 {
						largest = sh
					}
				}
			}
			var want *rootFacts
			for _, sh := range shapesOf(r, leaves) {
				folded := 0 // mid clusters that folded a key
				root := sh.root.report(t, "", func(c *simCluster, res Result) {
					if len(c.children) == 0 {
						return
					}
					requireFaithful(t, res.Summary, c.leafNodes())
					require.Equal(t, c.clusters(), res.Summary.Clusters, c.name)
					if c != sh.root && slices.ContainsFunc(res.Summary.Groups, func(g api.Group) bool { return len(g.FoldedKeys()) > 0 }) {
						folded++
					}
				}).Summary
				got := factsOf(root, sh.root.clusters()-len(leaves), values)
				t.Logf("%-12s root: %5d bytes, %2d groups, depth %2d; %d mid clusters folded keys", sh.name, jsonSize(t, root), len(root.Groups), root.Depth, folded)
				if want == nil {
					require.Equal(t, nodes, got.Nodes)
					require.Equal(t, shapeKey(largest), got.Largest)
					require.Equal(t, len(leaves), got.LeafClusters)
					requireNoDiff(t, values, got.Selectable)
					want = &got
				}
				requireNoDiff(t, *want, got)
				if sh.name == "random" {
					again := mirrored(sh.root).report(t, "", func(*simCluster, Result) {}).Summary
					requireNoDiff(t, root, again)
				}
			}
		})
	}
}

// Below the bound merging is associative: over leaves whose summaries
// never need bounding at any level, the root's groups are the same for
// every tree, but for their depth.
func TestTreeShapesBelowBound(t *testing.T) {
	for _, seed := range seeds() {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed))
			mix := fleetMix{regions: 2, zones: 2, types: 2, missing: 0.05, tainted: 0.2}
			t.Logf("seed %d (replay: -run TestTreeShapesBelowBound -args -seed=%d)", seed, seed)
			leaves := randomLeaves(r, mix, 12)
			var want []api.Group
			for _, sh := range shapesOf(r, leaves) {
				root := sh.root.report(t, "", func(c *simCluster, res Result) {
					for _, g := range res.Summary.Groups {
						require.Empty(t, g.FoldedKeys(), "%s folded a key: the fleet is too large for this test", c.name)
					}
				}).Summary
				if want == nil {
					want = root.Groups
				}
				if d := cmp.Diff(want, root.Groups, cmpopts.IgnoreFields(api.Group{}, "Depth"), cmpopts.EquateEmpty()); d != "" {
					t.Fatalf("%s: groups differ from the flat tree's (-want +got):\n%s", sh.name, d)
				}
			}
		})
	}
}
