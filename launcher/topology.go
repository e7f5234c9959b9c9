package launcher

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// DefaultTopology is the playground `make demo` starts (a copy of
// hack/demo/playground.yaml): root; east and west; two leaves each, with two
// kwok nodes labelled with their region and zone.
//
//go:embed playground.yaml
var DefaultTopology []byte

// Topology is a playground: clusters, each joining its parent, and the kwok
// nodes of each. Exactly one cluster, the root, has no parent.
type Topology struct {
	Clusters []TopologyCluster `json:"clusters"`
}

// TopologyCluster is one cluster of a Topology.
type TopologyCluster struct {
	// Name is the cluster's name, and its node name in its parent.
	Name string `json:"name"`
	// Parent is the cluster it joins; empty for the root.
	Parent string `json:"parent,omitempty"`
	// Region is where the cluster's host is; its parent's when empty.
	Region string `json:"region,omitempty"`
	// Nodes are its kwok nodes.
	Nodes []TopologyNode `json:"nodes,omitempty"`
}

// TopologyNode is a kwok node, or with Real a node run by a real kubelet
// with containerd (AddRealNode). Resources not given take the values of
// DefaultNodeCapacity; a real node has the machine's.
type TopologyNode struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Real runs the node with a real kubelet and containerd where the
	// machine allows it (CheckRealNodes), else with kwok.
	Real   bool               `json:"real,omitempty"`
	CPU    *resource.Quantity `json:"cpu,omitempty"`
	Memory *resource.Quantity `json:"memory,omitempty"`
	Pods   *resource.Quantity `json:"pods,omitempty"`
}

// reservedClusterNames would collide with what a playground directory holds
// beside the clusters' own directories.
var reservedClusterNames = []string{"bin", "etcd-data", "kubeconfig"}

// LoadTopology reads a topology file, or DefaultTopology when path is
// empty.
func LoadTopology(path string) (*Topology, error) {
	data := DefaultTopology
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	t, err := ParseTopology(data)
	if err != nil && path != "" {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, err
}

// ParseTopology reads a Topology from YAML (unknown fields are errors) and
// validates it.
func ParseTopology(data []byte) (*Topology, error) {
	var t Topology
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return nil, fmt.Errorf("parsing topology: %w", err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Validate reports every problem of the topology: names (DNS labels,
// unique), parents (known, no cycle, one root), nodes (names unique in their
// cluster and distinct from its children's, labels, resources).
func (t *Topology) Validate() error {
	var errs field.ErrorList
	clusters := field.NewPath("clusters")
	if len(t.Clusters) == 0 {
		return errors.New("invalid topology: no clusters")
	}
	byName := map[string]*TopologyCluster{}
	for i := range t.Clusters {
		c := &t.Clusters[i]
		p := clusters.Index(i).Child("name")
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(p, "every cluster needs a name"))
			continue
		case byName[c.Name] != nil:
			errs = append(errs, field.Duplicate(p, c.Name))
			continue
		case slices.Contains(reservedClusterNames, c.Name):
			errs = append(errs, field.Invalid(p, c.Name, "reserved name (one of "+strings.Join(reservedClusterNames, ", ")+")"))
		}
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p, c.Name, msg))
		}
		byName[c.Name] = c
	}
	var roots []string
	for i, c := range t.Clusters {
		p := clusters.Index(i)
		switch {
		case c.Parent == "":
			roots = append(roots, c.Name)
		case byName[c.Parent] == nil:
			errs = append(errs, field.NotFound(p.Child("parent"), c.Parent))
		}
		children := t.Children(c.Name)
		nodes := map[string]bool{}
		for j, n := range c.Nodes {
			np := p.Child("nodes").Index(j)
			switch {
			case n.Name == "":
				errs = append(errs, field.Required(np.Child("name"), "every node needs a name"))
			case nodes[n.Name]:
				errs = append(errs, field.Duplicate(np.Child("name"), n.Name))
			case slices.Contains(children, n.Name):
				errs = append(errs, field.Invalid(np.Child("name"), n.Name, "is the node name of child cluster "+n.Name))
			default:
				for _, msg := range validation.IsDNS1123Subdomain(n.Name) {
					errs = append(errs, field.Invalid(np.Child("name"), n.Name, msg))
				}
			}
			nodes[n.Name] = true
			errs = append(errs, metav1validation.ValidateLabels(n.Labels, np.Child("labels"))...)
			for _, r := range []struct {
				name string
				q    *resource.Quantity
			}{{"cpu", n.CPU}, {"memory", n.Memory}, {"pods", n.Pods}} {
				if r.q == nil {
					continue
				}
				if n.Real {
					errs = append(errs, field.Forbidden(np.Child(r.name), "a real node has the machine's resources"))
					continue
				}
				if r.q.Sign() <= 0 {
					errs = append(errs, field.Invalid(np.Child(r.name), r.q.String(), "must be positive"))
				} else if _, exact := r.q.AsInt64(); r.name == "pods" && !exact {
					errs = append(errs, field.Invalid(np.Child(r.name), r.q.String(), "must be a whole number"))
				}
			}
		}
	}
	if cycle := t.cycle(byName); cycle != nil {
		errs = append(errs, field.Invalid(clusters, strings.Join(cycle, " -> "), "parents form a cycle"))
	}
	switch {
	case len(roots) == 0:
		errs = append(errs, field.Required(clusters, "no root: exactly one cluster must have no parent"))
	case len(roots) > 1:
		errs = append(errs, field.Invalid(clusters, strings.Join(roots, ", "), "several roots: exactly one cluster must have no parent"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid topology: %w", errs.ToAggregate())
	}
	return nil
}

// cycle returns a cycle of parents (first cluster repeated at the end), or
// nil.
func (t *Topology) cycle(byName map[string]*TopologyCluster) []string {
	done := map[string]bool{}
	for _, c := range t.Clusters {
		var path []string
		onPath := map[string]bool{}
		for n := c.Name; n != "" && !done[n]; {
			if onPath[n] {
				return append(path[slices.Index(path, n):], n)
			}
			onPath[n] = true
			path = append(path, n)
			next := byName[n]
			if next == nil {
				break
			}
			n = next.Parent
		}
		for _, n := range path {
			done[n] = true
		}
	}
	return nil
}

// Root returns the name of the cluster without a parent (of a valid
// topology).
func (t *Topology) Root() string {
	for _, c := range t.Clusters {
		if c.Parent == "" {
			return c.Name
		}
	}
	return ""
}

// Children returns the names of the clusters whose parent is name.
func (t *Topology) Children(name string) []string {
	var out []string
	for _, c := range t.Clusters {
		if c.Parent == name && c.Name != "" {
			out = append(out, c.Name)
		}
	}
	return out
}

// Subtree returns name and every cluster below it, sorted.
func (t *Topology) Subtree(name string) []string {
	out := []string{name}
	for _, c := range t.Children(name) {
		out = append(out, t.Subtree(c)...)
	}
	slices.Sort(out)
	return out
}

// Edges returns the {child, parent} pairs, in the order of the clusters.
func (t *Topology) Edges() [][2]string {
	var out [][2]string
	for _, c := range t.Clusters {
		if c.Parent != "" {
			out = append(out, [2]string{c.Name, c.Parent})
		}
	}
	return out
}

// HasRealNodes reports whether any node of the topology is Real.
func (t *Topology) HasRealNodes() bool {
	for _, c := range t.Clusters {
		for _, n := range c.Nodes {
			if n.Real {
				return true
			}
		}
	}
	return false
}

// Region returns the region of cluster name: its own, or its nearest
// ancestor's.
func (t *Topology) Region(name string) string {
	byName := map[string]TopologyCluster{}
	for _, c := range t.Clusters {
		byName[c.Name] = c
	}
	for seen := map[string]bool{}; name != "" && !seen[name]; name = byName[name].Parent {
		seen[name] = true
		if r := byName[name].Region; r != "" {
			return r
		}
	}
	return ""
}

// ClusterOptions returns what to start for each cluster; with kwokOnly,
// Real nodes are kwok nodes too. A cluster with real nodes runs
// local-path-provisioner (ClusterOptions.LocalPath).
func (t *Topology) ClusterOptions(kwokOnly bool) []ClusterOptions {
	out := make([]ClusterOptions, 0, len(t.Clusters))
	for _, c := range t.Clusters {
		o := ClusterOptions{Name: c.Name, Region: t.Region(c.Name)}
		for _, n := range c.Nodes {
			if n.Real && !kwokOnly {
				o.RealNodes = append(o.RealNodes, RealNodeOptions{Name: n.Name, Labels: n.Labels})
				continue
			}
			capacity := DefaultNodeCapacity()
			for name, q := range map[corev1.ResourceName]*resource.Quantity{
				corev1.ResourceCPU: n.CPU, corev1.ResourceMemory: n.Memory, corev1.ResourcePods: n.Pods,
			} {
				if q != nil {
					capacity[name] = q.DeepCopy()
				}
			}
			o.Nodes = append(o.Nodes, NodeOptions{Name: n.Name, Labels: n.Labels, Capacity: capacity})
		}
		// Clusters with real nodes have a real provisioner: claims made
		// at the root land on their disks.
		o.LocalPath = len(o.RealNodes) > 0
		out = append(out, o)
	}
	return out
}
