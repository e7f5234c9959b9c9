package nestctl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/api"
)

func TestTree(t *testing.T) {
	group := func(region, alloc, free string) api.Group {
		return api.Group{Labels: map[string]string{"topology.kubernetes.io/region": region}, Nodes: 2,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(alloc), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Free:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(free), corev1.ResourceMemory: resource.MustParse("6Gi")}}
	}
	virtualNode := func(name string, ready corev1.ConditionStatus, s api.Summary) *corev1.Node {
		raw, err := json.Marshal(s)
		require.NoError(t, err)
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelCluster: name}, Annotations: map[string]string{api.AnnotationSummary: string(raw)}},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
		}
	}
	mid := virtualNode("mid", corev1.ConditionTrue, api.Summary{Cluster: "mid", Covered: []string{"leaf-a", "leaf-b", "mid"}, Depth: 1,
		Groups: []api.Group{group("east", "4", "3"), group("west", "6", "5500m")}})
	mid.Annotations[api.AnnotationGatewayTunnel] = "up"
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	stats, err := json.Marshal(api.PeerStats{LastHandshake: &at, Received: 3 << 20, Sent: 1536, RTTMicroseconds: 412, At: at.Add(time.Second)})
	require.NoError(t, err)
	mid.Annotations[api.AnnotationGatewayTunnelStats] = string(stats)
	paths, err := json.Marshal([]api.DirectPath{
		{Cluster: "far", State: api.DirectUp, Endpoint: "10.250.0.9:51820", Since: at.Add(-time.Minute), RTTMicroseconds: 12345},
		{Cluster: "nat", State: api.DirectFailed, Endpoint: "10.250.0.8:40000", Reason: "no handshake", Since: at},
	})
	require.NoError(t, err)
	mid.Annotations[api.AnnotationGatewayPaths] = string(paths)
	now = func() time.Time { return at.Add(95 * time.Second) }
	t.Cleanup(func() { now = time.Now })
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.ClusterInfoConfigMap, Namespace: metav1.NamespacePublic}, Data: map[string]string{api.ClusterInfoNameKey: "root"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real-1"}},
		mid,
		virtualNode("east", corev1.ConditionFalse, api.Summary{Cluster: "east", Covered: []string{"east"}, Groups: []api.Group{group("east", "8", "8")}}),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "mid"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "mid"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
	)
	tree, err := LoadTree(t.Context(), client)
	require.NoError(t, err)
	var out bytes.Buffer
	tree.Render(&out)
	want := "root (1 nodes of its own, 2 children)\n" +
		"├── east  NotReady  depth 1  nodes 2  cpu 0/8  memory 2Gi/8Gi  pods 0  regions east\n" +
		"└── mid  Ready  depth 2  nodes 4  cpu 1500m/10  memory 4Gi/16Gi  pods 1  regions east,west  tunnel up (handshake 95s ago, round trip 0.412 ms, 3MiB in, 1.5KiB out)\n" +
		"    ⇢ far: direct, to 10.250.0.9:51820, for 2m35s, round trip 12.3 ms when it came up\n" +
		"    ⇢ nat: through the tree, direct path failed for 95s: no handshake\n" +
		"    ├── leaf-a\n" +
		"    └── leaf-b\n"
	require.Equal(t, want, out.String())
}

// A child under two children of this cluster (a diamond) is marked shared
// under both, with the share each offers.
func TestTreeShared(t *testing.T) {
	vn := func(name string, covered []string, share int) *corev1.Node {
		raw, err := json.Marshal(api.Summary{Cluster: name, Covered: covered, Depth: 1, SharePercent: share})
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelCluster: name},
			Annotations: map[string]string{api.AnnotationSummary: string(raw)}}}
	}
	client := fake.NewClientset(vn("east", []string{"east", "west-1"}, 0), vn("west", []string{"west", "west-1"}, 0), vn("west-2", []string{"west-2"}, 50))
	tree, err := LoadTree(t.Context(), client)
	require.NoError(t, err)
	var out bytes.Buffer
	tree.Render(&out)
	require.Contains(t, out.String(), "├── east  NotReady")
	require.Equal(t, 2, strings.Count(out.String(), "│   └── west-1 (shared)\n"), "under east and under west")
	require.Contains(t, out.String(), "regions -  share 50%\n")
}

// A child whose summary is too large to list its clusters shows how many
// there are; a shared cluster with several parents is still marked.
func TestTreeLargeSubtree(t *testing.T) {
	vn := func(s api.Summary) *corev1.Node {
		raw, err := json.Marshal(s)
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.Cluster, Labels: map[string]string{api.LabelCluster: s.Cluster},
			Annotations: map[string]string{api.AnnotationSummary: string(raw)}}}
	}
	client := fake.NewClientset(
		vn(api.Summary{Version: api.SummaryVersion, Cluster: "field-a", Clusters: 101, Branches: []string{"field-a", "shared-leaf"}, Depth: 1}),
		vn(api.Summary{Version: api.SummaryVersion, Cluster: "field-b", Covered: []string{"field-b", "shared-leaf"}, Clusters: 2, Branches: []string{"field-b", "shared-leaf"}, Depth: 1}),
	)
	tree, err := LoadTree(t.Context(), client)
	require.NoError(t, err)
	var out bytes.Buffer
	tree.Render(&out)
	require.Contains(t, out.String(), "│   └── 100 clusters below (too many to list in the summary)\n")
	require.Contains(t, out.String(), "    └── shared-leaf (shared)\n")
}
