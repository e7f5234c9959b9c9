package virtualnode

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/nestlet/nestlet/api"
)

const (
	regionKey = "topology.kubernetes.io/region"
	zoneKey   = "topology.kubernetes.io/zone"
)

// ownedBy makes uid, of kind, the pod's controller.
func ownedBy(pod *corev1.Pod, kind, uid string) *corev1.Pod {
	pod.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: kind, Name: "owner", UID: types.UID(uid), Controller: ptr.To(true),
	}}
	return pod
}

func avoidAnnotation(t *testing.T, m map[string]string) string {
	t.Helper()
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	return string(raw)
}

func summaryAnnotation(t *testing.T, s api.Summary) string {
	t.Helper()
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	return string(raw)
}

func TestClusterAndIsVirtual(t *testing.T) {
	tests := []struct {
		name        string
		node        *corev1.Node
		wantCluster string
	}{
		{name: "nil node", node: nil},
		{name: "real node", node: st.MakeNode().Name("n").Label(regionKey, "east").Obj()},
		{name: "virtual node", node: st.MakeNode().Name("v").Label(api.LabelCluster, "child").Obj(), wantCluster: "child"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.wantCluster, Cluster(tt.node))
			require.Equal(t, tt.wantCluster != "", IsVirtual(tt.node))
		})
	}
}

func TestSummary(t *testing.T) {
	want := api.Summary{Cluster: "child", Covered: []string{"child"}, Time: "2030-01-01T00:00:00Z",
		Groups: []api.Group{{Labels: map[string]string{regionKey: "east"}, Nodes: 1}}}
	tests := []struct {
		name   string
		node   *corev1.Node
		wantOK bool
	}{
		{name: "no annotation", node: st.MakeNode().Name("v").Label(api.LabelCluster, "child").Obj()},
		{name: "malformed annotation", node: st.MakeNode().Name("v").Label(api.LabelCluster, "child").
			Annotation(api.AnnotationSummary, "{not json").Obj()},
		{name: "readable", node: st.MakeNode().Name("v").Label(api.LabelCluster, "child").
			Annotation(api.AnnotationSummary, summaryAnnotation(t, want)).Obj(), wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := Summary(tt.node)
			require.Equal(t, tt.wantOK, ok)
			if tt.wantOK {
				require.Equal(t, want.Cluster, s.Cluster)
				require.Equal(t, want.Groups[0].Labels, s.Groups[0].Labels)
			}
		})
	}
}

func TestIsDaemonSetPod(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "bare pod", pod: st.MakePod().Name("p").Obj()},
		{name: "ReplicaSet pod", pod: ownedBy(st.MakePod().Name("p").Obj(), "ReplicaSet", "rs")},
		{name: "DaemonSet pod", pod: ownedBy(st.MakePod().Name("p").Obj(), "DaemonSet", "ds"), want: true},
		{name: "DaemonSet owner that is not the controller", pod: func() *corev1.Pod {
			p := ownedBy(st.MakePod().Name("p").Obj(), "DaemonSet", "ds")
			p.OwnerReferences[0].Controller = nil
			return p
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, IsDaemonSetPod(tt.pod))
		})
	}
}

func TestUntoleratedTaint(t *testing.T) {
	provider := corev1.Taint{Key: api.TaintKeyProvider, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}
	dedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	unreachable := corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}
	prefer := corev1.Taint{Key: "soft", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule}
	tests := []struct {
		name         string
		pod          *corev1.Pod
		taints       []corev1.Taint
		skipProvider bool
		want         *corev1.Taint
	}{
		{name: "no taints", pod: st.MakePod().Obj()},
		{name: "PreferNoSchedule is ignored", pod: st.MakePod().Obj(), taints: []corev1.Taint{prefer}},
		{name: "NoSchedule not tolerated", pod: st.MakePod().Obj(), taints: []corev1.Taint{prefer, dedicated}, want: &dedicated},
		{name: "NoExecute not tolerated", pod: st.MakePod().Obj(), taints: []corev1.Taint{unreachable}, want: &unreachable},
		{name: "tolerated", pod: st.MakePod().Toleration("dedicated").Obj(), taints: []corev1.Taint{dedicated}},
		{name: "provider taint counts unless skipped", pod: st.MakePod().Obj(), taints: []corev1.Taint{provider}, want: &provider},
		{name: "provider taint skipped", pod: st.MakePod().Obj(), taints: []corev1.Taint{provider}, skipProvider: true},
		{name: "skipping the provider taint skips no other", pod: st.MakePod().Obj(),
			taints: []corev1.Taint{provider, unreachable}, skipProvider: true, want: &unreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, untolerated := UntoleratedTaint(tt.pod, tt.taints, tt.skipProvider)
			require.Equal(t, tt.want != nil, untolerated)
			if tt.want != nil {
				require.Equal(t, *tt.want, got)
			}
		})
	}
}

func TestGroupNode(t *testing.T) {
	taints := []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	tests := []struct {
		name       string
		node       *corev1.Node
		group      api.Group
		wantLabels map[string]string
	}{
		{
			name: "group labels over node labels",
			node: st.MakeNode().Name("v").Label(api.LabelCluster, "child").Label(regionKey, "east").
				Label("kubernetes.io/hostname", "v").Obj(),
			group: api.Group{Labels: map[string]string{regionKey: "west", zoneKey: "west-1"}, Taints: taints},
			wantLabels: map[string]string{api.LabelCluster: "child", regionKey: "west", zoneKey: "west-1",
				"kubernetes.io/hostname": "v"},
		},
		{
			name:       "node without labels",
			node:       &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "v"}},
			group:      api.Group{Labels: map[string]string{regionKey: "east"}},
			wantLabels: map[string]string{regionKey: "east"},
		},
		{
			name:       "group without labels",
			node:       st.MakeNode().Name("v").Label(api.LabelCluster, "child").Obj(),
			group:      api.Group{},
			wantLabels: map[string]string{api.LabelCluster: "child"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.node.DeepCopy()
			gn := GroupNode(tt.node, &tt.group)
			require.Equal(t, tt.node.Name, gn.Name)
			require.Equal(t, tt.wantLabels, gn.Labels)
			require.Equal(t, tt.group.Taints, gn.Spec.Taints)
			require.Equal(t, before, tt.node, "GroupNode must not change the virtual node")
		})
	}
}

func TestMatchingGroups(t *testing.T) {
	node := st.MakeNode().Name("v").Label(api.LabelCluster, "child").Obj()
	dedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	s := &api.Summary{Groups: []api.Group{
		{Labels: map[string]string{regionKey: "east"}},
		{Labels: map[string]string{regionKey: "west"}},
		{Labels: map[string]string{regionKey: "east"}, Taints: []corev1.Taint{dedicated}},
	}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []int
	}{
		{name: "plain pod: every untainted group", pod: st.MakePod().Obj(), want: []int{0, 1}},
		{name: "nodeSelector east", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "east"}).Obj(), want: []int{0}},
		{name: "tolerating east", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "east"}).Toleration("dedicated").Obj(),
			want: []int{0, 2}},
		{name: "affinity NotIn east", pod: st.MakePod().NodeAffinityNotIn(regionKey, []string{"east"}).Obj(), want: []int{1}},
		{name: "nodeSelector north", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "north"}).Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MatchingGroups(tt.pod, node, s)
			var want []*api.Group
			for _, i := range tt.want {
				want = append(want, &s.Groups[i])
			}
			require.Equal(t, len(want), len(got))
			for i := range want {
				require.Same(t, want[i], got[i])
			}
			for i := range s.Groups {
				require.Equal(t, contains(tt.want, i),
					GroupMatches(tt.pod, node, &s.Groups[i], nodeaffinity.GetRequiredNodeAffinity(tt.pod)), "group %d", i)
			}
		})
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestDescribeSelector(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{name: "nothing asked", pod: st.MakePod().Obj(), want: "the pod's tolerations"},
		{name: "topology prefix trimmed", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "north"}).Obj(), want: "region=north"},
		{name: "keys sorted", pod: st.MakePod().NodeSelector(map[string]string{zoneKey: "z1", "disk": "ssd", regionKey: "east"}).Obj(),
			want: "disk=ssd, region=east, zone=z1"},
		{name: "required affinity", pod: st.MakePod().NodeAffinityIn(regionKey, []string{"east"}, st.NodeSelectorTypeMatchExpressions).Obj(),
			want: "the pod's required node affinity"},
		{name: "selector and affinity", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "east"}).
			NodeAffinityIn(zoneKey, []string{"z1"}, st.NodeSelectorTypeMatchExpressions).Obj(),
			want: "region=east, the pod's required node affinity"},
		{name: "preferred affinity only", pod: st.MakePod().NodeAffinity(&corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
		}).Obj(), want: "the pod's tolerations"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, DescribeSelector(tt.pod))
		})
	}
}

func TestAvoidedUntil(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	later := now.Add(5 * time.Minute)
	earlier := now.Add(-5 * time.Minute)
	rfc := func(t time.Time) string { return t.Format(time.RFC3339) }
	owned := func() *corev1.Pod { return ownedBy(st.MakePod().Name("p").Obj(), "ReplicaSet", "rs-1") }
	node := func(avoid string) *corev1.Node {
		w := st.MakeNode().Name("v").Label(api.LabelCluster, "child")
		if avoid != "" {
			w = w.Annotation(api.AnnotationAvoid, avoid)
		}
		return w.Obj()
	}
	tests := []struct {
		name      string
		node      *corev1.Node
		pod       *corev1.Pod
		wantUntil time.Time
		wantOK    bool
	}{
		{name: "no annotation", node: node(""), pod: owned()},
		{name: "pod without controller", node: node(avoidAnnotation(t, map[string]string{"rs-1": rfc(later)})), pod: st.MakePod().Name("p").Obj()},
		{name: "owner listed until later", node: node(avoidAnnotation(t, map[string]string{"rs-1": rfc(later)})), pod: owned(),
			wantUntil: later, wantOK: true},
		{name: "other owner listed", node: node(avoidAnnotation(t, map[string]string{"rs-2": rfc(later)})), pod: owned()},
		{name: "expired entry", node: node(avoidAnnotation(t, map[string]string{"rs-1": rfc(earlier)})), pod: owned()},
		{name: "entry ending now", node: node(avoidAnnotation(t, map[string]string{"rs-1": rfc(now)})), pod: owned()},
		{name: "malformed JSON", node: node(`{"rs-1":`), pod: owned()},
		{name: "malformed time ignored, others kept", node: node(avoidAnnotation(t, map[string]string{"rs-1": rfc(later), "rs-2": "soon"})),
			pod: owned(), wantUntil: later, wantOK: true},
		{name: "malformed time of the owner", node: node(avoidAnnotation(t, map[string]string{"rs-1": "soon"})), pod: owned()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			until, ok := AvoidedUntil(tt.node, tt.pod, now)
			require.Equal(t, tt.wantOK, ok)
			require.True(t, tt.wantUntil.Equal(until), "until %v, want %v", until, tt.wantUntil)
		})
	}
}
