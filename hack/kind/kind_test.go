// Package kind checks what hack/kind-up.sh generates for its kind clusters,
// without Docker: `hack/kind-up.sh configs DIR` writes the kind
// configurations and chart values of the tree, and nothing else.
package kind

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// kindCluster is the part of kind's v1alpha4 Cluster the script writes;
// strict parsing refuses any other field (a typo kind would reject).
type kindCluster struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name"`
	Networking struct {
		PodSubnet string `json:"podSubnet"`
	} `json:"networking"`
	Nodes []kindNode `json:"nodes"`
}

type kindNode struct {
	Role   string            `json:"role"`
	Image  string            `json:"image,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// values is the part of the chart's values the script sets.
type values struct {
	Image struct {
		Repository string `json:"repository"`
		Tag        string `json:"tag"`
	} `json:"image"`
	Scheduler struct {
		Enabled       bool   `json:"enabled"`
		SchedulerName string `json:"schedulerName,omitempty"`
	} `json:"scheduler"`
	Proxy *struct {
		Enabled     bool `json:"enabled"`
		KubeletPort int  `json:"kubeletPort"`
		TunnelPort  int  `json:"tunnelPort"`
		Service     struct {
			Type            string `json:"type"`
			KubeletNodePort int    `json:"kubeletNodePort"`
			TunnelNodePort  int    `json:"tunnelNodePort"`
		} `json:"service"`
		NodePorts struct {
			First int `json:"first"`
			Count int `json:"count"`
		} `json:"nodePorts"`
	} `json:"proxy,omitempty"`
}

func generate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join("..", "kind-up.sh"), "configs", dir)
	cmd.Env = append(os.Environ(), "KIND_NODE_IMAGE=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/kind-up.sh configs:\n%s", out)
	return dir
}

func TestKindConfigs(t *testing.T) {
	dir := generate(t)

	// The demo's tree: region of each leaf; the root and the mid clusters
	// have no region.
	leaves := map[string]string{"east-1": "east", "east-2": "east", "west-1": "west", "west-2": "west"}
	all := []string{"east", "east-1", "east-2", "root", "west", "west-1", "west-2"}

	files, err := filepath.Glob(filepath.Join(dir, "*.kind.yaml"))
	require.NoError(t, err)
	var names []string
	subnets := map[string]netip.Prefix{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var c kindCluster
		require.NoError(t, yaml.UnmarshalStrict(data, &c), f)
		require.Equal(t, "Cluster", c.Kind, f)
		require.Equal(t, "kind.x-k8s.io/v1alpha4", c.APIVersion, f)
		require.Equal(t, c.Name+".kind.yaml", filepath.Base(f))
		names = append(names, c.Name)

		region, leaf := leaves[c.Name]
		want := []kindNode{{Role: "control-plane"}}
		if leaf {
			labels := map[string]string{"topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": c.Name}
			want = []kindNode{{Role: "control-plane", Labels: labels}, {Role: "worker", Labels: labels}}
		}
		if diff := cmp.Diff(want, c.Nodes); diff != "" {
			t.Errorf("nodes of %s (-want +got):\n%s", c.Name, diff)
		}
		subnet, err := netip.ParsePrefix(c.Networking.PodSubnet)
		require.NoError(t, err, "pod subnet of %s", c.Name)
		for other, theirs := range subnets {
			require.False(t, subnet.Overlaps(theirs), "the pod subnets of %s and %s overlap", c.Name, other)
		}
		subnets[c.Name] = subnet
	}
	sort.Strings(names)
	require.Equal(t, all, names)
}

// Each child is granted its own pod subnet and those below it: what the
// script passes to nestctl token create --pod-cidrs.
func TestKindGrants(t *testing.T) {
	for child, want := range map[string]string{
		"east":   "10.201.0.0/16,10.203.0.0/16,10.204.0.0/16",
		"east-1": "10.203.0.0/16",
		"west":   "10.202.0.0/16,10.205.0.0/16,10.206.0.0/16",
	} {
		cmd := exec.CommandContext(t.Context(), "bash", filepath.Join("..", "kind-up.sh"), "grants", child)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "hack/kind-up.sh grants %s:\n%s", child, out)
		require.Equal(t, want, strings.TrimSpace(string(out)), child)
	}
}

func TestKindChartValues(t *testing.T) {
	dir := generate(t)
	for _, name := range []string{"root", "east", "west", "east-1", "east-2", "west-1", "west-2"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name+".values.yaml"))
			require.NoError(t, err)
			var v values
			require.NoError(t, yaml.UnmarshalStrict(data, &v))
			require.Equal(t, "ghcr.io/nestlet/nestlet", v.Image.Repository)
			require.Equal(t, "kind", v.Image.Tag, "the tag kind-up.sh builds and loads")

			parent := name == "root" || name == "east" || name == "west"
			if !parent {
				require.False(t, v.Scheduler.Enabled, "a leaf keeps its stock scheduler")
				require.Nil(t, v.Proxy, "a leaf has no children to serve")
				return
			}
			require.True(t, v.Scheduler.Enabled)
			require.Equal(t, "default-scheduler", v.Scheduler.SchedulerName, "plain Deployments reach virtual nodes")
			require.NotNil(t, v.Proxy)
			require.True(t, v.Proxy.Enabled)
			require.Equal(t, "NodePort", v.Proxy.Service.Type)
			// The proxy listens on the ports its NodePorts expose, so that
			// the address it advertises (the node's) is right as is.
			require.Equal(t, v.Proxy.KubeletPort, v.Proxy.Service.KubeletNodePort)
			require.Equal(t, v.Proxy.TunnelPort, v.Proxy.Service.TunnelNodePort)
			// Each child's virtual node has a kubelet port of its own
			// (kubectl top), each its own nodePort too.
			require.Positive(t, v.Proxy.NodePorts.Count)
			last := v.Proxy.NodePorts.First + v.Proxy.NodePorts.Count - 1
			for _, p := range []int{v.Proxy.KubeletPort, v.Proxy.TunnelPort, v.Proxy.NodePorts.First, last} {
				require.True(t, p >= 30000 && p <= 32767, "NodePort %d outside the default range", p)
			}
			require.False(t, v.Proxy.KubeletPort >= v.Proxy.NodePorts.First && v.Proxy.KubeletPort <= last, "the kubelet port among the node ports")
			require.False(t, v.Proxy.TunnelPort >= v.Proxy.NodePorts.First && v.Proxy.TunnelPort <= last, "the tunnel port among the node ports")
		})
	}
}
