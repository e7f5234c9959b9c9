package summary

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
)

// rl builds a ResourceList from name, quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

type nodeOpt func(*corev1.Node)

// newNode returns a Ready, schedulable node with the given allocatable.
func newNode(name string, alloc corev1.ResourceList, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Capacity:    alloc.DeepCopy(),
			Allocatable: alloc,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withLabels(kv ...string) nodeOpt {
	return func(n *corev1.Node) {
		for i := 0; i < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withTaints(ts ...corev1.Taint) nodeOpt {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

func withReady(s corev1.ConditionStatus) nodeOpt {
	return func(n *corev1.Node) { n.Status.Conditions[0].Status = s }
}

func withoutConditions() nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}
	}
}

func cordoned() nodeOpt {
	return func(n *corev1.Node) { n.Spec.Unschedulable = true }
}

func withAnnotation(k, v string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}

// virtualOf makes the node a virtual node carrying s.
func virtualOf(t *testing.T, s api.Summary) nodeOpt {
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("marshal summary: %v", err)
	}
	return withAnnotation(api.AnnotationSummary, string(raw))
}

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

type podOpt func(*corev1.Pod)

// newPod returns a Running pod bound to node with one container requesting
// reqs.
func newPod(name, node string, reqs corev1.ResourceList, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: reqs}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withPhase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

func withOrigin(origin string) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{api.AnnotationOrigin: origin}
	}
}

func withInit(reqs corev1.ResourceList, sidecar bool) podOpt {
	return func(p *corev1.Pod) {
		c := corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{Requests: reqs}}
		if sidecar {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func withOverhead(o corev1.ResourceList) podOpt {
	return func(p *corev1.Pod) { p.Spec.Overhead = o }
}

func withPodLevel(reqs corev1.ResourceList) podOpt {
	return func(p *corev1.Pod) { p.Spec.Resources = &corev1.ResourceRequirements{Requests: reqs} }
}

// requireNoDiff fails with a "(-want +got)" diff unless want and got are
// equal, quantities compared by value and nil equal to empty.
func requireNoDiff(t *testing.T, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("mismatch (-want +got):\n%s", d)
	}
}
