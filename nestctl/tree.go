package nestctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	units "github.com/docker/go-units"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
)

// Tree is what `nestctl tree` shows.
type Tree struct {
	// Name of the cluster at the top (from kube-public/nestlet-info).
	Name string
	// RealNodes of the cluster at the top.
	RealNodes int
	Children  []Child
}

// Child is one virtual node.
type Child struct {
	Name, Ready      string
	Depth, Nodes     int
	Pods             int
	CPU, Memory      [2]resource.Quantity // allocatable, used
	Regions, Covered []string
	// Clusters counts the clusters below (itself included); Covered lists
	// them only while the summary has room for their names.
	Clusters int
	// branches are the clusters below with children or several parents.
	branches []string
	// SharePercent is the share of its free capacity the child offers
	// this cluster (100 unless it has other parents).
	SharePercent int
	// Shared are the covered clusters another child covers too (a
	// diamond): counted once thanks to their shares.
	Shared map[string]bool
	// Peer is the state of the child gateway's peer link to this
	// cluster's ("up", "down"...), empty without gateways; PeerStats its
	// last handshake and bytes, as the child last wrote them. Printed as
	// "tunnel ...", the name it has had since before the word "peer".
	Peer      string
	PeerStats *api.PeerStats
	// Paths are the child's direct paths to other clusters' gateways
	// (not through the tree), as it last wrote them.
	Paths []api.DirectPath
}

// now is the time `nestctl tree` reads handshake ages against.
var now = time.Now

// LoadTree reads the nodes and pods of a cluster.
func LoadTree(ctx context.Context, client kubernetes.Interface) (*Tree, error) {
	t := &Tree{Name: "this cluster"}
	if cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{}); err == nil && cm.Data[api.ClusterInfoNameKey] != "" {
		t.Name = cm.Data[api.ClusterInfoNameKey]
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	perNode := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			perNode[p.Spec.NodeName]++
		}
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Labels[api.LabelCluster] == "" {
			t.RealNodes++
			continue
		}
		t.Children = append(t.Children, childOf(n, perNode[n.Name]))
	}
	slices.SortFunc(t.Children, func(a, b Child) int { return strings.Compare(a.Name, b.Name) })
	markShared(t.Children)
	return t, nil
}

// markShared records, in each child, the clusters it covers (itself
// included) that another child covers too.
func markShared(children []Child) {
	count := map[string]int{}
	for _, c := range children {
		for _, cl := range c.below() {
			count[cl]++
		}
	}
	for i := range children {
		children[i].Shared = map[string]bool{}
		for _, cl := range children[i].below() {
			if count[cl] > 1 {
				children[i].Shared[cl] = true
			}
		}
	}
}

// below returns the clusters c is known to cover, itself first: every one
// while the summary lists them, else those where the graph branches.
func (c Child) below() []string {
	out := append([]string{c.Name}, c.Covered...)
	for _, b := range c.branches {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

func childOf(n *corev1.Node, pods int) Child {
	c := Child{Name: n.Name, Ready: "NotReady", Pods: pods, SharePercent: 100}
	c.Peer, _ = api.ChildAnnotation(n, api.AnnotationGatewayTunnel)
	if raw, ok := api.ChildAnnotation(n, api.AnnotationGatewayTunnelStats); ok {
		var st api.PeerStats
		if json.Unmarshal([]byte(raw), &st) == nil {
			c.PeerStats = &st
		}
	}
	if raw, ok := api.ChildAnnotation(n, api.AnnotationGatewayPaths); ok {
		_ = json.Unmarshal([]byte(raw), &c.Paths)
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			c.Ready = "Ready"
		}
	}
	s, ok := api.ParseSummary(n)
	if !ok {
		c.Ready += ", no summary"
		return c
	}
	c.Depth = s.Depth + 1
	if s.SharePercent > 0 {
		c.SharePercent = s.SharePercent
	}
	regions := map[string]bool{}
	for _, g := range s.Groups {
		c.Nodes += g.Nodes
		for i, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			alloc, free := g.Allocatable[r], g.Free[r]
			used := alloc.DeepCopy()
			used.Sub(free)
			target := &c.CPU
			if i == 1 {
				target = &c.Memory
			}
			target[0].Add(alloc)
			target[1].Add(used)
		}
		if r := g.Labels["topology.kubernetes.io/region"]; r != "" {
			regions[r] = true
		}
	}
	for r := range regions {
		c.Regions = append(c.Regions, r)
	}
	slices.Sort(c.Regions)
	for _, cl := range s.Covered {
		if cl != n.Name {
			c.Covered = append(c.Covered, cl)
		}
	}
	c.Clusters = max(s.Clusters, len(s.Covered))
	c.branches = s.Branches
	return c
}

// Render draws the tree.
func (t *Tree) Render(w io.Writer) {
	fmt.Fprintf(w, "%s (%d nodes of its own, %d children)\n", t.Name, t.RealNodes, len(t.Children))
	for i, c := range t.Children {
		branch, indent := "├── ", "│   "
		if i == len(t.Children)-1 {
			branch, indent = "└── ", "    "
		}
		regions := "-"
		if len(c.Regions) > 0 {
			regions = strings.Join(c.Regions, ",")
		}
		share := ""
		if c.SharePercent < 100 {
			share = fmt.Sprintf("  share %d%%", c.SharePercent)
		}
		if c.Peer != "" {
			share += "  tunnel " + c.Peer + peerDetail(c.PeerStats)
		}
		fmt.Fprintf(w, "%s%s%s  %s  depth %d  nodes %d  cpu %s/%s  memory %s/%s  pods %d  regions %s%s\n",
			branch, c.Name, mark(c.Shared[c.Name]), c.Ready, c.Depth, c.Nodes, c.CPU[1].String(), c.CPU[0].String(), c.Memory[1].String(), c.Memory[0].String(), c.Pods, regions, share)
		for _, p := range c.Paths {
			fmt.Fprintf(w, "%s%s\n", indent, pathLine(p))
		}
		for j, cl := range c.Covered {
			leaf := "├── "
			if j == len(c.Covered)-1 {
				leaf = "└── "
			}
			fmt.Fprintf(w, "%s%s%s%s\n", indent, leaf, cl, mark(c.Shared[cl]))
		}
		if len(c.Covered) == 0 && c.Clusters > 1 {
			fmt.Fprintf(w, "%s└── %d clusters below (too many to list in the summary)\n", indent, c.Clusters-1)
		}
	}
}

// peerDetail is the last handshake's age and the bytes through a peer
// link (received and sent by the child).
func peerDetail(st *api.PeerStats) string {
	if st == nil {
		return ""
	}
	handshake := "no handshake"
	if st.LastHandshake != nil {
		handshake = "handshake " + duration.HumanDuration(now().Sub(*st.LastHandshake)) + " ago"
	}
	return fmt.Sprintf(" (%s%s, %s in, %s out)", handshake, roundTrip(st.RTTMicroseconds, ""), units.BytesSize(float64(st.Received)), units.BytesSize(float64(st.Sent)))
}

// roundTrip is ", round trip <ms>" and when, or "" when unknown.
func roundTrip(us int64, when string) string {
	if us <= 0 {
		return ""
	}
	return fmt.Sprintf(", round trip %.3g ms%s", float64(us)/1000, when)
}

// pathLine says where the traffic to the other end of a direct path goes.
func pathLine(p api.DirectPath) string {
	since := duration.HumanDuration(now().Sub(p.Since))
	if p.State == api.DirectUp {
		return fmt.Sprintf("⇢ %s: direct, to %s, for %s%s", p.Cluster, p.Endpoint, since, roundTrip(p.RTTMicroseconds, " when it came up"))
	}
	return fmt.Sprintf("⇢ %s: through the tree, direct path %s for %s: %s", p.Cluster, p.State, since, p.Reason)
}

// mark flags a cluster that more than one child covers.
func mark(shared bool) string {
	if shared {
		return " (shared)"
	}
	return ""
}
