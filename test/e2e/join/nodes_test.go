package join

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

const regionKey = "topology.kubernetes.io/region"

// realAllocatable sums the allocatable of the kwok nodes of clusters.
func realAllocatable(t *testing.T, clusters ...string) corev1.ResourceList {
	t.Helper()
	sum := corev1.ResourceList{}
	for _, name := range clusters {
		nodes, err := env.Cluster(name).Client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: "type=kwok"})
		require.NoError(t, err)
		for _, n := range nodes.Items {
			for r, q := range n.Status.Allocatable {
				cur := sum[r]
				cur.Add(q)
				sum[r] = cur
			}
		}
	}
	return sum
}

func sameResources(want, got corev1.ResourceList) bool {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		w, g := want[r], got[r]
		if w.Cmp(g) != 0 {
			return false
		}
	}
	return true
}

func requireSameResources(t *testing.T, want, got corev1.ResourceList) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		w, g := want[r], got[r]
		require.Zerof(t, w.Cmp(g), "%s: want %s, got %s", r, w.String(), g.String())
	}
}

// waitNode waits until node name in cluster satisfies ok.
func waitNode(t *testing.T, cluster, name string, timeout time.Duration, ok func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var last *corev1.Node
	framework.EventuallyEvery(t, 100*time.Millisecond, timeout, fmt.Sprintf("node %s in %s: condition met", name, cluster), func(ctx context.Context) (bool, string) {
		n, err := env.Cluster(cluster).Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = n
		return ok(n), fmt.Sprintf("labels %v, allocatable %v, conditions %v", n.Labels, n.Status.Allocatable, n.Status.Conditions)
	})
	return last
}

func TestChildrenAreNodesWithExactCapacity(t *testing.T) {
	for _, tt := range []struct {
		child, region string
		leaves        []string
	}{
		{child: "east", region: "east", leaves: []string{"east"}},
		{child: "west", region: "west", leaves: []string{"west"}},
		{child: "mid", region: "", leaves: []string{"leaf-a", "leaf-b"}},
	} {
		t.Run(tt.child, func(t *testing.T) {
			want := realAllocatable(t, tt.leaves...)
			// Reports flow up level by level: wait for the whole subtree.
			n := waitNode(t, "root", tt.child, time.Minute, func(n *corev1.Node) bool {
				_, role := n.Labels[api.LabelNodeRoleCluster]
				return launcher.NodeReady(n) && role && sameResources(want, n.Status.Allocatable) && n.Labels[regionKey] == tt.region
			})
			requireSameResources(t, want, n.Status.Allocatable)
			requireSameResources(t, want, n.Status.Capacity)
			if tt.region != "" {
				require.Equal(t, tt.region, n.Labels[regionKey])
			} else {
				require.NotContains(t, n.Labels, regionKey, "a child spanning regions must not carry a region label")
			}
			require.Contains(t, n.Spec.Taints, corev1.Taint{Key: api.TaintKeyProvider, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule})

			s, ok := api.ParseSummary(n)
			require.True(t, ok, "summary annotation")
			regions := map[string]bool{}
			for _, g := range s.Groups {
				regions[g.Labels[regionKey]] = true
			}
			if tt.child == "mid" {
				require.Equal(t, map[string]bool{"east": true, "west": true}, regions, "mid's summary lists both regions")
				require.Equal(t, []string{"leaf-a", "leaf-b", "mid"}, s.Covered)
				require.Equal(t, 1, s.Depth)
			} else {
				require.Equal(t, map[string]bool{tt.region: true}, regions)
			}
		})
	}

	// kubectl shows the children with ROLES cluster.
	out, err := exec.CommandContext(t.Context(), env.Binaries.Kubectl, "--kubeconfig", env.Cluster("root").KubeconfigPath, "get", "nodes").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, child := range []string{"east", "west", "mid"} {
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == child {
				found = true
				require.Equal(t, "Ready", f[1], line)
				require.Equal(t, "cluster", f[2], line)
			}
		}
		require.Truef(t, found, "kubectl get nodes lists %s:\n%s", child, out)
	}
}

// A pod created directly in a leaf lowers what the root sees of mid, through
// two levels of reports.
func TestLeafPodPropagatesToRoot(t *testing.T) {
	ctx := t.Context()
	full := realAllocatable(t, "leaf-a", "leaf-b")
	before := waitNode(t, "root", "mid", time.Minute, func(n *corev1.Node) bool {
		return sameResources(full, n.Status.Allocatable) // no pod runs yet
	}).Status.Allocatable[corev1.ResourceCPU]

	leaf := env.Cluster("leaf-a")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "local-load", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1250m")}},
		}}},
	}
	_, err := leaf.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = leaf.Client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})

	want := before.DeepCopy()
	want.Sub(resource.MustParse("1250m"))
	start := time.Now()
	waitNode(t, "root", "mid", time.Minute, func(n *corev1.Node) bool {
		got := n.Status.Allocatable[corev1.ResourceCPU]
		return got.Cmp(want) == 0
	})
	t.Logf("root saw the leaf pod after %s (report frequency 3s per level, 2 levels)", time.Since(start).Round(time.Millisecond))
}

// nestctl tree draws the root's children from their summaries.
func TestNestctlTree(t *testing.T) {
	// The tree shows the summaries as they are: wait until they cover
	// every node.
	for child, nodes := range map[string]int{"east": 2, "west": 1, "mid": 3} {
		waitNode(t, "root", child, time.Minute, func(n *corev1.Node) bool {
			s, ok := api.ParseSummary(n)
			if !ok || !launcher.NodeReady(n) {
				return false
			}
			total := 0
			for _, g := range s.Groups {
				total += g.Nodes
			}
			return total == nodes
		})
	}
	out, err := env.Cluster("root").Nestctl(t.Context(), "tree")
	require.NoError(t, err)
	t.Logf("nestctl tree:\n%s", out)
	require.Contains(t, out, "root (")
	lines := strings.Split(out, "\n")
	find := func(name string) string {
		for _, l := range lines {
			if strings.Contains(l, "── "+name+"  ") {
				return l
			}
		}
		t.Fatalf("no line for %s in\n%s", name, out)
		return ""
	}
	require.Contains(t, find("east"), "Ready  depth 1  nodes 2")
	require.Contains(t, find("east"), "regions east")
	require.Contains(t, find("mid"), "depth 2  nodes 3")
	require.Contains(t, find("mid"), "regions east,west")
	require.Contains(t, out, "── leaf-a")
	require.Contains(t, out, "── leaf-b")
}
