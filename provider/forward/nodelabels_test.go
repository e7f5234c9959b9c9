package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestDropParentOnlyLabels(t *testing.T) {
	// east in the parent: its region, which its nodes carry too, and a
	// label set on it there alone.
	labels := map[string]string{"topology.kubernetes.io/region": "east", "team": "blue"}
	carried := func(key string) bool { return key == "topology.kubernetes.io/region" }
	term := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: rs}
	}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	withAffinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	region := req("topology.kubernetes.io/region", corev1.NodeSelectorOpIn, "east")
	for _, tc := range []struct {
		name           string
		labels         map[string]string
		selector, want map[string]string
		affinity       *corev1.Affinity
		wantAffinity   *corev1.Affinity
	}{
		{name: "a selector on the parent's label alone is dropped", labels: labels,
			selector: map[string]string{"team": "blue", "topology.kubernetes.io/region": "east"},
			want:     map[string]string{"topology.kubernetes.io/region": "east"}},
		{name: "the last selector dropped leaves none", labels: labels,
			selector: map[string]string{"team": "blue"}},
		{name: "a value the virtual node does not hold stays", labels: labels,
			selector: map[string]string{"team": "red"}, want: map[string]string{"team": "red"}},
		{name: "before the node is seen nothing is dropped",
			selector: map[string]string{"team": "blue"}, want: map[string]string{"team": "blue"}},
		{name: "an expression on the parent's label is dropped, the rest of the term stays", labels: labels,
			affinity:     withAffinity(term(req("team", corev1.NodeSelectorOpIn, "blue", "green"), region)),
			wantAffinity: withAffinity(term(region))},
		{name: "Exists on the parent's label is dropped", labels: labels,
			affinity:     withAffinity(term(req("team", corev1.NodeSelectorOpExists), region)),
			wantAffinity: withAffinity(term(region))},
		{name: "a term that held on the virtual node alone meets the requirement", labels: labels,
			affinity: withAffinity(term(region, req("zone", corev1.NodeSelectorOpIn, "a")), term(req("team", corev1.NodeSelectorOpIn, "blue")))},
		{name: "NotIn of the node's own value stays (the parent's scheduler refused it)", labels: labels,
			affinity:     withAffinity(term(req("team", corev1.NodeSelectorOpNotIn, "blue"))),
			wantAffinity: withAffinity(term(req("team", corev1.NodeSelectorOpNotIn, "blue")))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: tc.selector, Affinity: tc.affinity}}
			dropParentOnlyLabels(d, tc.labels, carried)
			require.Equal(t, tc.want, d.Spec.NodeSelector)
			if tc.wantAffinity == nil && tc.affinity != nil {
				require.Nil(t, d.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
				return
			}
			require.Equal(t, tc.wantAffinity, d.Spec.Affinity)
		})
	}
}
