package launcher

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The built-in topology is hack/demo/playground.yaml, byte for byte: root;
// east and west; two leaves each with one real node labelled with region
// and zone (a kwok node where real ones cannot run).
func TestDefaultTopology(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	shipped, err := os.ReadFile(filepath.Join(root, "hack", "demo", "playground.yaml"))
	require.NoError(t, err)
	require.Equal(t, string(shipped), string(DefaultTopology), "hack/demo/playground.yaml and launcher/playground.yaml differ")

	topo, err := ParseTopology(DefaultTopology)
	require.NoError(t, err)
	require.Equal(t, "root", topo.Root())
	want := [][2]string{{"east", "root"}, {"west", "root"}, {"east-1", "east"}, {"east-2", "east"}, {"west-1", "west"}, {"west-2", "west"}}
	if diff := cmp.Diff(want, topo.Edges()); diff != "" {
		t.Errorf("edges (-want +got):\n%s", diff)
	}
	require.Equal(t, []string{"east", "east-1", "east-2"}, topo.Subtree("east"))
	require.True(t, topo.HasRealNodes())
	for _, o := range topo.ClusterOptions(false) {
		require.Empty(t, o.Nodes, o.Name)
		if len(topo.Children(o.Name)) > 0 {
			require.Empty(t, o.RealNodes, o.Name)
			continue
		}
		require.Len(t, o.RealNodes, 1, o.Name)
		n := o.RealNodes[0]
		require.Equal(t, o.Name, n.Labels["topology.kubernetes.io/zone"], n.Name)
		require.Equal(t, o.Name[:4], n.Labels["topology.kubernetes.io/region"], n.Name)
	}
	// On kwok instead, the same nodes with the same labels.
	for _, o := range topo.ClusterOptions(true) {
		require.Empty(t, o.RealNodes, o.Name)
		if len(topo.Children(o.Name)) == 0 {
			require.Len(t, o.Nodes, 1, o.Name)
			require.Equal(t, o.Name, o.Nodes[0].Labels["topology.kubernetes.io/zone"])
		}
	}
}

func TestTopologyNodeResources(t *testing.T) {
	topo, err := ParseTopology([]byte(`
clusters:
- name: root
  nodes:
  - name: small
    cpu: "2"
    pods: 10
  - name: plain
`))
	require.NoError(t, err)
	nodes := topo.ClusterOptions(false)[0].Nodes
	want := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("10"),
	}
	for name, q := range want {
		got := nodes[0].Capacity[name]
		require.Zero(t, q.Cmp(got), "%s: %s", name, got.String())
	}
	for name, q := range DefaultNodeCapacity() {
		require.Zero(t, q.Cmp(nodes[1].Capacity[name]), name)
	}
}

func TestTopologyInvalid(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"empty", `clusters: []`, "no clusters"},
		{"unknown field", "clusters:\n- name: root\n  parnet: x", `unknown field "parnet"`},
		{"unknown parent", "clusters:\n- name: root\n- name: a\n  parent: nowhere", `clusters[1].parent: Not found: "nowhere"`},
		{"duplicate", "clusters:\n- name: root\n- name: root", `clusters[1].name: Duplicate value: "root"`},
		{"cycle", "clusters:\n- name: root\n- name: a\n  parent: b\n- name: b\n  parent: a", `a -> b -> a": parents form a cycle`},
		{"self parent", "clusters:\n- name: root\n  parent: root", `root -> root": parents form a cycle`},
		{"two roots", "clusters:\n- name: r1\n- name: r2", "several roots"},
		{"bad name", "clusters:\n- name: Root_1", `clusters[0].name: Invalid value: "Root_1"`},
		{"reserved name", "clusters:\n- name: bin", "reserved name"},
		{"node named like a child", "clusters:\n- name: root\n  nodes:\n  - name: east\n- name: east\n  parent: root", "node name of child cluster east"},
		{"duplicate node", "clusters:\n- name: root\n  nodes:\n  - name: n1\n  - name: n1", `clusters[0].nodes[1].name: Duplicate value: "n1"`},
		{"bad label", "clusters:\n- name: root\n  nodes:\n  - name: n1\n    labels: {\"a b\": c}", "clusters[0].nodes[0].labels"},
		{"fractional pods", "clusters:\n- name: root\n  nodes:\n  - name: n1\n    pods: 1.5", "must be a whole number"},
		{"negative cpu", "clusters:\n- name: root\n  nodes:\n  - name: n1\n    cpu: -1", "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTopology([]byte(tt.yaml))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoadTopology(t *testing.T) {
	topo, err := LoadTopology("")
	require.NoError(t, err)
	require.Len(t, topo.Clusters, 7)

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("clusters:\n- name: a\n  parent: nowhere\n"), 0o644))
	_, err = LoadTopology(bad)
	require.ErrorContains(t, err, bad+`: invalid topology: [clusters[0].parent: Not found: "nowhere"`)
}

func TestRegionInherited(t *testing.T) {
	topo, err := ParseTopology([]byte("clusters:\n- name: root\n- name: east\n  parent: root\n  region: east\n- name: east-1\n  parent: east\n- name: east-2\n  parent: east\n  region: east-b\n"))
	require.NoError(t, err)
	got := map[string]string{}
	for _, o := range topo.ClusterOptions(true) {
		got[o.Name] = o.Region
	}
	require.Equal(t, map[string]string{"root": "", "east": "east", "east-1": "east", "east-2": "east-b"}, got)
}
