package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
)

// TestDelegatePlacedInItsDomains: the domains the parent's scheduler chose
// become the delegate's nodeSelector, the spread constraints on those keys
// are dropped (judged above), others are kept, and the annotation is not
// passed on (the child's scheduler writes its own).
func TestDelegatePlacedInItsDomains(t *testing.T) {
	const zone, host = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
	parent := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", UID: "p1", Annotations: map[string]string{
			api.AnnotationDomains: api.FormatDomains(map[string]string{zone: "east-b"}),
		}},
		Spec: corev1.PodSpec{
			NodeName:     "east",
			NodeSelector: map[string]string{"topology.kubernetes.io/region": "east"},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: corev1.DoNotSchedule},
				{MaxSkew: 1, TopologyKey: host, WhenUnsatisfiable: corev1.ScheduleAnyway},
			},
		},
	}
	cfg := &Config{TargetName: "to-root", TargetUID: "t1", ClusterName: "east", ParentName: "root"}
	d := buildDelegate(parent, "web-1", cfg, []string{"root", "east"})
	require.Equal(t, map[string]string{"topology.kubernetes.io/region": "east", zone: "east-b"}, d.Spec.NodeSelector)
	require.Len(t, d.Spec.TopologySpreadConstraints, 1)
	require.Equal(t, host, d.Spec.TopologySpreadConstraints[0].TopologyKey)
	require.NotContains(t, d.Annotations, api.AnnotationDomains)
	// The parent pod is left as it was.
	require.Len(t, parent.Spec.TopologySpreadConstraints, 2)
	require.Len(t, parent.Spec.NodeSelector, 1)

	// Without domains, the spec is kept whole.
	delete(parent.Annotations, api.AnnotationDomains)
	d = buildDelegate(parent, "web-1", cfg, []string{"root", "east"})
	require.Len(t, d.Spec.TopologySpreadConstraints, 2)
	require.Len(t, d.Spec.NodeSelector, 1)
}
