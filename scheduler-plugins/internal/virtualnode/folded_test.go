package virtualnode

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nestlet/nestlet/api"
)

// A group whose keys were folded to keep the summary small matches a pod
// exactly when some label set its counts allow would: a listed value, or,
// with nodes counted in Others, any value or none.
func TestGroupMatchesFoldedKeys(t *testing.T) {
	const zone, gen = "topology.kubernetes.io/zone", "example.com/generation"
	listed := &api.Group{Labels: map[string]string{"topology.kubernetes.io/region": "west"}, Nodes: 5,
		Values: map[string]map[string]int{zone: {"z1": 3, "z2": 2}}}
	withOthers := &api.Group{Labels: map[string]string{"topology.kubernetes.io/region": "west"}, Nodes: 6,
		Values: map[string]map[string]int{zone: {"z1": 3, "z2": 2}}, Others: map[string]int{zone: 1}}
	onlyOthers := &api.Group{Nodes: 4, Others: map[string]int{zone: 4}}
	numeric := &api.Group{Nodes: 2, Values: map[string]map[string]int{gen: {"3": 1, "5": 1}}}
	twoKeys := &api.Group{Nodes: 2, Values: map[string]map[string]int{zone: {"z1": 1, "z2": 1}, gen: {"3": 1, "5": 1}}}
	// Malformed (no agent writes them): a folded key counting no node.
	emptyValues := &api.Group{Nodes: 2, Values: map[string]map[string]int{zone: {}}}
	zeroOthers := &api.Group{Nodes: 2, Others: map[string]int{zone: 0}}
	// Three numeric folded keys of 7 values each: 343 label sets, more
	// than GroupMatches tries.
	sevens := func() map[string]int {
		return map[string]int{"1": 1, "2": 1, "3": 1, "4": 1, "5": 1, "6": 1, "7": 1}
	}
	tooMany := &api.Group{Nodes: 7, Values: map[string]map[string]int{"example.com/a": sevens(), "example.com/b": sevens(), "example.com/c": sevens()}}

	selector := func(kv ...string) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{}}}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
		return p
	}
	expr := func(exprs ...corev1.NodeSelectorRequirement) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}},
		}}}}
	}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		group *api.Group
		want  bool
	}{
		{"listed value", selector(zone, "z1"), listed, true},
		{"value not listed, none unlisted", selector(zone, "z3"), listed, false},
		{"region and listed zone", selector("topology.kubernetes.io/region", "west", zone, "z2"), listed, true},
		{"other region", selector("topology.kubernetes.io/region", "east", zone, "z2"), listed, false},
		{"no selector", selector(), listed, true},
		{"NotIn every listed value", expr(req(zone, corev1.NodeSelectorOpNotIn, "z1", "z2")), listed, false},
		{"NotIn one listed value", expr(req(zone, corev1.NodeSelectorOpNotIn, "z1")), listed, true},
		{"DoesNotExist, every node has a value", expr(req(zone, corev1.NodeSelectorOpDoesNotExist)), listed, false},
		{"unlisted value may be in Others", selector(zone, "z3"), withOthers, true},
		{"DoesNotExist may be in Others", expr(req(zone, corev1.NodeSelectorOpDoesNotExist)), withOthers, true},
		{"NotIn every listed value, Others left", expr(req(zone, corev1.NodeSelectorOpNotIn, "z1", "z2")), withOthers, true},
		{"only Others", selector(zone, "anything"), onlyOthers, true},
		{"Gt met by a listed number", expr(req(gen, corev1.NodeSelectorOpGt, "4")), numeric, true},
		{"Gt met by none", expr(req(gen, corev1.NodeSelectorOpGt, "5")), numeric, false},
		{"two folded keys, one node each", expr(req(zone, corev1.NodeSelectorOpIn, "z2"), req(gen, corev1.NodeSelectorOpLt, "4")), twoKeys, true},
		{"two folded keys, a value absent", expr(req(zone, corev1.NodeSelectorOpIn, "z3"), req(gen, corev1.NodeSelectorOpLt, "4")), twoKeys, false},
		{"malformed: empty values, no selector", selector(), emptyValues, false},
		{"malformed: zero others", selector(zone, "z1"), zeroOthers, false},
		{"too many label sets to try: fails closed", expr(req("example.com/a", corev1.NodeSelectorOpGt, "0"), req("example.com/b", corev1.NodeSelectorOpGt, "0"), req("example.com/c", corev1.NodeSelectorOpGt, "0")), tooMany, false},
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Labels: map[string]string{api.LabelCluster: "child"}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := GroupMatches(tt.pod, node, tt.group, nodeaffinity.GetRequiredNodeAffinity(tt.pod))
			assert.Equal(t, tt.want, got)
		})
	}
}
