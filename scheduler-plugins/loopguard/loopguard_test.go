package loopguard

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/schedtest"
)

func newPlugin(t *testing.T, hopLimit int) *LoopGuard {
	t.Helper()
	p, err := New(context.Background(), &config.LoopGuardArgs{HopLimit: int32(hopLimit)}, nil)
	require.NoError(t, err)
	return p.(*LoopGuard)
}

func nodeInfo(node *corev1.Node) *framework.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	return ni
}

func virtualNode(cluster string) *corev1.Node {
	return st.MakeNode().Name("vn-"+cluster).Label(api.LabelCluster, cluster).
		Taints([]corev1.Taint{{Key: api.TaintKeyProvider, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}}).Obj()
}

func podWithPath(path ...string) *corev1.Pod {
	w := st.MakePod().Name("p").Namespace("default")
	if len(path) > 0 {
		w = w.Annotation(api.AnnotationPath, strings.Join(path, ","))
	}
	return w.Obj()
}

// pathOf returns a path of n distinct clusters, none named "target".
func pathOf(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "c" + string(rune('a'+i))
	}
	return out
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name        string
		hopLimit    int
		pod         *corev1.Pod
		node        *corev1.Node
		wantCode    fwk.Code
		wantMessage []string
	}{
		{name: "pod without path", hopLimit: 8, pod: podWithPath(), node: virtualNode("target")},
		{name: "pod without path, hop limit 1", hopLimit: 1, pod: podWithPath(), node: virtualNode("target")},
		{name: "path elsewhere", hopLimit: 8, pod: podWithPath("root", "mid"), node: virtualNode("target")},
		{name: "cluster on the path", hopLimit: 8, pod: podWithPath("root", "target", "mid"), node: virtualNode("target"),
			wantCode:    fwk.UnschedulableAndUnresolvable,
			wantMessage: []string{"vn-target", "already passed through cluster target", "path root,target,mid"}},
		{name: "cluster last on the path", hopLimit: 8, pod: podWithPath("root", "target"), node: virtualNode("target"),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"path root,target"}},
		{name: "cluster on the path wins over the hop limit", hopLimit: 1, pod: podWithPath("target", "b", "c"), node: virtualNode("target"),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"already passed through cluster target"}},
		// A path of n clusters has been forwarded n-1 times: the next hop
		// is the n-th, as the provider's nextPath counts it.
		{name: "path as long as the hop limit: next hop reaches it", hopLimit: 3, pod: podWithPath(pathOf(3)...), node: virtualNode("target")},
		{name: "path one shorter", hopLimit: 3, pod: podWithPath(pathOf(2)...), node: virtualNode("target")},
		{name: "path one longer than the hop limit: next hop exceeds it", hopLimit: 3, pod: podWithPath(pathOf(4)...), node: virtualNode("target"),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"vn-target", "4 hops", "limit 3"}},
		{name: "default limit reached", hopLimit: 0, pod: podWithPath(pathOf(8)...), node: virtualNode("target")},
		{name: "default limit exceeded", hopLimit: 0, pod: podWithPath(pathOf(9)...), node: virtualNode("target"),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"9 hops", "limit 8"}},
		{name: "real node, looping path", hopLimit: 8, pod: podWithPath("target", "target"), node: st.MakeNode().Name("target").Obj()},
		{name: "real node, path over the limit", hopLimit: 1, pod: podWithPath(pathOf(5)...), node: st.MakeNode().Name("real").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPlugin(t, tt.hopLimit)
			status := pl.Filter(context.Background(), framework.NewCycleState(), tt.pod, nodeInfo(tt.node))
			require.Equal(t, tt.wantCode, status.Code(), status.Message())
			for _, m := range tt.wantMessage {
				require.Contains(t, status.Message(), m)
			}
			schedtest.RequireCleanFailure(t, tt.pod, status)
		})
	}
}

// TestHopLimitBoundary checks the boundary against api.HopsTo, which
// the provider's forwarding shares: the last path accepted is one whose next
// hop is exactly the limit.
func TestHopLimitBoundary(t *testing.T) {
	for limit := 1; limit <= 4; limit++ {
		pl := newPlugin(t, limit)
		for n := 0; n <= limit+2; n++ {
			path := pathOf(n)
			got := pl.Filter(context.Background(), framework.NewCycleState(), podWithPath(path...), nodeInfo(virtualNode("target")))
			want := api.HopsTo(path) <= limit
			require.Equal(t, want, got.IsSuccess(), "limit %d, path %v: %v", limit, path, got.Message())
			require.Equal(t, n <= limit, got.IsSuccess(), "limit %d, path length %d", limit, n)
		}
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name         string
		args         runtime.Object
		wantHopLimit int
		wantErr      string
	}{
		{name: "nil args: default", args: nil, wantHopLimit: api.DefaultHopLimit},
		{name: "empty unknown: default", args: &runtime.Unknown{}, wantHopLimit: 8},
		{name: "unknown without hopLimit: default", args: &runtime.Unknown{Raw: []byte(`{}`)}, wantHopLimit: 8},
		{name: "unknown JSON", args: &runtime.Unknown{Raw: []byte(`{"hopLimit":3}`), ContentType: runtime.ContentTypeJSON}, wantHopLimit: 3},
		{name: "unknown YAML", args: &runtime.Unknown{Raw: []byte("hopLimit: 5\n"), ContentType: runtime.ContentTypeYAML}, wantHopLimit: 5},
		{name: "typed args", args: &config.LoopGuardArgs{HopLimit: 2}, wantHopLimit: 2},
		{name: "typed empty args: default", args: &config.LoopGuardArgs{}, wantHopLimit: 8},
		{name: "typed nil args: default", args: (*config.LoopGuardArgs)(nil), wantHopLimit: 8},
		{name: "negative hopLimit", args: &runtime.Unknown{Raw: []byte(`{"hopLimit":-1}`)}, wantErr: "hopLimit must be at least 1, got -1"},
		{name: "typed negative hopLimit", args: &config.LoopGuardArgs{HopLimit: -1}, wantErr: "hopLimit must be at least 1"},
		{name: "malformed JSON", args: &runtime.Unknown{Raw: []byte(`{"hopLimit":`)}, wantErr: "LoopGuard args"},
		{name: "wrong type", args: &runtime.Unknown{Raw: []byte(`{"hopLimit":"eight"}`)}, wantErr: "LoopGuard args"},
		{name: "foreign typed args", args: &corev1.Pod{}, wantErr: "LoopGuard args"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(context.Background(), tt.args, nil)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, Name, p.Name())
			require.Equal(t, tt.wantHopLimit, p.(*LoopGuard).hopLimit)
		})
	}
}
