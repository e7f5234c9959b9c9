package summaryaffinity

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/schedtest"
)

const regionKey = "topology.kubernetes.io/region"

var (
	providerTaint    = corev1.Taint{Key: api.TaintKeyProvider, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}
	dedicatedTaint   = corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	unreachableTaint = corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}
	preferTaint      = corev1.Taint{Key: "soft", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule}
)

func filter(t *testing.T, pod *corev1.Pod, node *corev1.Node) *fwk.Status {
	t.Helper()
	p, err := New(context.Background(), nil, nil)
	require.NoError(t, err)
	require.Equal(t, Name, p.Name())
	ni := framework.NewNodeInfo()
	if node != nil {
		ni.SetNode(node)
	}
	return p.(fwk.FilterPlugin).Filter(context.Background(), framework.NewCycleState(), pod, ni)
}

func shape(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

func group(region string, taints ...corev1.Taint) api.Group {
	return api.Group{
		Labels:      map[string]string{regionKey: region},
		Taints:      taints,
		Nodes:       1,
		Allocatable: shape("8", "32Gi"),
		Free:        shape("8", "32Gi"),
		Shapes:      []corev1.ResourceList{shape("8", "32Gi")},
	}
}

// virtualNode is the virtual node of cluster child, with a summary of
// groups unless groups is nil; it carries no region label of its own.
func virtualNode(t *testing.T, groups []api.Group, extraTaints ...corev1.Taint) *corev1.Node {
	t.Helper()
	w := st.MakeNode().Name("vn-child").Label(api.LabelCluster, "child").
		Label(api.LabelNodeType, api.NodeTypeVirtualKubelet).
		Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "16", corev1.ResourceMemory: "64Gi"}).
		Taints(append([]corev1.Taint{providerTaint}, extraTaints...))
	if groups != nil {
		raw, err := json.Marshal(api.Summary{
			Cluster: "child", Covered: []string{"child"},
			GroupKeys: api.DefaultGroupKeys, Groups: groups, Time: "2030-01-01T00:00:00Z",
		})
		require.NoError(t, err)
		w = w.Annotation(api.AnnotationSummary, string(raw))
	}
	return w.Obj()
}

// relaxed gives n's provider taint the effect PreferNoSchedule, as a
// parent with --child-taint-effect=PreferNoSchedule does.
func relaxed(n *corev1.Node) *corev1.Node {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == api.TaintKeyProvider {
			n.Spec.Taints[i].Effect = corev1.TaintEffectPreferNoSchedule
		}
	}
	return n
}

func daemonSetPod() *st.PodWrapper {
	w := st.MakePod().Name("ds-pod").Namespace("kube-system")
	w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds-uid", Controller: ptr.To(true)}}
	return w
}

func TestFilterRealNode(t *testing.T) {
	eastNode := func(taints ...corev1.Taint) *corev1.Node {
		return st.MakeNode().Name("real").Label(regionKey, "east").Taints(taints).Obj()
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		node        *corev1.Node
		wantCode    fwk.Code
		wantMessage string
	}{
		{name: "plain pod", pod: st.MakePod().Obj(), node: eastNode()},
		{name: "nodeSelector match", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "east"}).Obj(), node: eastNode()},
		{name: "nodeSelector mismatch", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "west"}).Obj(), node: eastNode(),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: "node(s) didn't match Pod's node affinity/selector"},
		{name: "required affinity match", pod: st.MakePod().NodeAffinityIn(regionKey, []string{"west", "east"}, st.NodeSelectorTypeMatchExpressions).Obj(),
			node: eastNode()},
		{name: "required affinity mismatch", pod: st.MakePod().NodeAffinityNotIn(regionKey, []string{"east"}).Obj(), node: eastNode(),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: ErrReasonAffinity},
		{name: "untolerated NoSchedule taint", pod: st.MakePod().Obj(), node: eastNode(dedicatedTaint),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: "node(s) had untolerated taint {dedicated: gpu}"},
		{name: "untolerated NoExecute taint", pod: st.MakePod().Obj(), node: eastNode(unreachableTaint),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: "node.kubernetes.io/unreachable"},
		{name: "tolerated NoSchedule taint", pod: st.MakePod().Toleration("dedicated").Obj(), node: eastNode(dedicatedTaint)},
		{name: "PreferNoSchedule ignored", pod: st.MakePod().Obj(), node: eastNode(preferTaint)},
		// A real node carrying the virtual-node taint (a foreign
		// virtual-kubelet) is a real node: its taint is not waived.
		{name: "provider taint on a real node", pod: st.MakePod().Obj(), node: eastNode(providerTaint),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: api.TaintKeyProvider},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := filter(t, tt.pod, tt.node)
			require.Equal(t, tt.wantCode, got.Code(), got.Message())
			require.Contains(t, got.Message(), tt.wantMessage)
			schedtest.RequireCleanFailure(t, tt.pod, got)
			// Same verdict as the built-in filters it replaces.
			require.Equal(t, tt.wantCode, builtinCode(t, tt.pod, tt.node))
		})
	}
}

// builtinCode runs the built-in NodeAffinity and TaintToleration filters.
func builtinCode(t *testing.T, pod *corev1.Pod, node *corev1.Node) fwk.Code {
	t.Helper()
	ctx := context.Background()
	na, err := nodeaffinity.New(ctx, &config.NodeAffinityArgs{}, nil, feature.Features{})
	require.NoError(t, err)
	tt, err := tainttoleration.New(ctx, nil, nil, feature.Features{})
	require.NoError(t, err)
	ni := framework.NewNodeInfo()
	ni.SetNode(node)
	for _, p := range []fwk.Plugin{na, tt} {
		if s := p.(fwk.FilterPlugin).Filter(ctx, framework.NewCycleState(), pod, ni); !s.IsSuccess() {
			return s.Code()
		}
	}
	return fwk.Success
}

func TestFilterVirtualNode(t *testing.T) {
	eastWest := []api.Group{group("east"), group("west")}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		node        *corev1.Node
		wantCode    fwk.Code
		wantMessage []string
	}{
		{name: "plain pod: provider taint tolerated implicitly", pod: st.MakePod().Obj(), node: virtualNode(t, eastWest)},
		{name: "nodeSelector east", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "east"}).Obj(), node: virtualNode(t, eastWest)},
		{name: "nodeSelector west", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "west"}).Obj(), node: virtualNode(t, eastWest)},
		{name: "nodeSelector north", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "north"}).Obj(), node: virtualNode(t, eastWest),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"vn-child", "no group matches region=north"}},
		{name: "nodeSelector on the node's own label", pod: st.MakePod().NodeSelector(map[string]string{api.LabelCluster: "child"}).Obj(),
			node: virtualNode(t, eastWest)},
		{name: "nodeSelector on another cluster", pod: st.MakePod().NodeSelector(map[string]string{api.LabelCluster: "other"}).Obj(),
			node: virtualNode(t, eastWest), wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"no group matches"}},
		{name: "required affinity In [east, north]", pod: st.MakePod().NodeAffinityIn(regionKey, []string{"east", "north"}, st.NodeSelectorTypeMatchExpressions).Obj(),
			node: virtualNode(t, eastWest)},
		{name: "required affinity In [north, south]", pod: st.MakePod().NodeAffinityIn(regionKey, []string{"north", "south"}, st.NodeSelectorTypeMatchExpressions).Obj(),
			node: virtualNode(t, eastWest), wantCode: fwk.UnschedulableAndUnresolvable,
			wantMessage: []string{"no group matches the pod's required node affinity"}},
		{name: "untolerated group taint", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "east"}).Obj(),
			node:     virtualNode(t, []api.Group{group("east", dedicatedTaint), group("west")}),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"no group matches region=east"}},
		{name: "only tainted groups", pod: st.MakePod().Obj(), node: virtualNode(t, []api.Group{group("east", dedicatedTaint)}),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"no group matches the pod's tolerations"}},
		{name: "tolerated group taint", pod: st.MakePod().NodeSelector(map[string]string{regionKey: "east"}).Toleration("dedicated").Obj(),
			node: virtualNode(t, []api.Group{group("east", dedicatedTaint), group("west")})},
		{name: "PreferNoSchedule group taint ignored", pod: st.MakePod().Obj(), node: virtualNode(t, []api.Group{group("east", preferTaint)})},
		{name: "DaemonSet pod", pod: daemonSetPod().Obj(), node: virtualNode(t, eastWest),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"vn-child", "DaemonSet"}},
		{name: "DaemonSet pod tolerating everything", pod: daemonSetPod().Tolerations([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}).Obj(),
			node: virtualNode(t, eastWest), wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"DaemonSet"}},
		{name: "DaemonSet pod, taint relaxed by the parent", pod: daemonSetPod().Obj(), node: relaxed(virtualNode(t, eastWest))},
		{name: "DaemonSet pod, taint relaxed, no group matches", pod: daemonSetPod().NodeSelector(map[string]string{regionKey: "north"}).Obj(),
			node: relaxed(virtualNode(t, eastWest)), wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"no group matches region=north"}},
		{name: "pod owned by a ReplicaSet", pod: func() *corev1.Pod {
			p := st.MakePod().Obj()
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
			return p
		}(), node: virtualNode(t, eastWest)},
		{name: "node taint not tolerated implicitly", pod: st.MakePod().Obj(), node: virtualNode(t, eastWest, unreachableTaint),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"vn-child", "untolerated taint {node.kubernetes.io/unreachable: }"}},
		{name: "node taint tolerated", pod: st.MakePod().Toleration("node.kubernetes.io/unreachable").Obj(), node: virtualNode(t, eastWest, unreachableTaint)},
		{name: "no summary", pod: st.MakePod().Obj(), node: virtualNode(t, nil),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"vn-child", "no summary reported yet"}},
		{name: "unreadable summary", pod: st.MakePod().Obj(), node: func() *corev1.Node {
			n := virtualNode(t, nil)
			n.Annotations = map[string]string{api.AnnotationSummary: "{"}
			return n
		}(), wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"no summary reported yet"}},
		{name: "summary without groups", pod: st.MakePod().Obj(), node: virtualNode(t, []api.Group{}),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: []string{"no group matches"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := filter(t, tt.pod, tt.node)
			require.Equal(t, tt.wantCode, got.Code(), got.Message())
			for _, m := range tt.wantMessage {
				require.Contains(t, got.Message(), m)
			}
			schedtest.RequireCleanFailure(t, tt.pod, got)
		})
	}
}

func TestFilterNoNode(t *testing.T) {
	got := filter(t, st.MakePod().Obj(), nil)
	require.Equal(t, fwk.Error, got.Code())
}
