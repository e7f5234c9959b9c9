package summary

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nestlet/nestlet/api"
)

// tree builds leaves into a tree under a root cluster named root: the
// leaves right under it with no fanouts, else the leaves in runs of
// fanouts[0] under mid clusters, those in runs of fanouts[1] under
// others, and so on.
func tree(root string, leaves []*simCluster, fanouts ...int) *simCluster {
	level := leaves
	for d, f := range fanouts {
		var up []*simCluster
		for i := 0; i < len(level); i += f {
			up = append(up, &simCluster{name: fmt.Sprintf("%s-mid%d-%d", root, d, len(up)), children: level[i:min(i+f, len(level))]})
		}
		level = up
	}
	return &simCluster{name: root, children: level}
}

// From one leaf cluster to 10,000, random labels, sizes and load: every
// summary of every level is within the bound and faithful to the leaves
// (requireFaithful), and counts its clusters.
func TestBoundRandomFleets(t *testing.T) {
	tests := []struct {
		name    string
		leaves  int
		fanouts []int
	}{
		{name: "1 leaf", leaves: 1},
		{name: "10 leaves", leaves: 10},
		{name: "1,000 leaves in fields of 100", leaves: 1000, fanouts: []int{100}},
		{name: "10,000 leaves in fields of 100, regions of 10 fields", leaves: 10_000, fanouts: []int{100, 10}},
	}
	for _, tt := range tests {
		ss := seeds()
		if tt.leaves > 1000 {
			ss = ss[len(ss)-1:] // about 2 s each: the fresh seed only, or -seed
		}
		for _, seed := range ss {
			t.Run(fmt.Sprintf("%s/seed %d", tt.name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, seed))
				mix := randomMix(r)
				t.Logf("seed %d (replay: -run 'TestBoundRandomFleets' -args -seed=%d), mix %+v", seed, seed, mix)
				root := tree("root", randomLeaves(r, mix, tt.leaves), tt.fanouts...)
				largest := map[int]int{} // by depth, the largest summary
				root.report(t, "", func(c *simCluster, res Result) {
					size := jsonSize(t, res.Summary)
					largest[res.Summary.Depth] = max(largest[res.Summary.Depth], size)
					if len(c.children) == 0 && tt.leaves > 10 {
						// A leaf of 1 to 3 nodes: the small fleets check those.
						require.LessOrEqual(t, size, api.MaxSummaryBytes, c.name)
						return
					}
					requireFaithful(t, res.Summary, c.leafNodes())
					require.Equal(t, c.clusters(), res.Summary.Clusters, c.name)
				})
				var levels []string
				for d := range len(tt.fanouts) + 2 {
					if b, ok := largest[d]; ok {
						levels = append(levels, fmt.Sprintf("depth %d: %d", d, b))
					}
				}
				t.Logf("largest summary in bytes (bound %d): %s", api.MaxSummaryBytes, strings.Join(levels, ", "))
			})
		}
	}
}
