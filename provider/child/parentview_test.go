package child

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
)

// What the parent says on the node reaches the Target in the Ready write
// when the parent decorated the node first, then only as it changes: a
// node the parent has not decorated says nothing (Compatible was written
// for it as if the parent were older than protocol ranges).
func TestParentView(t *testing.T) {
	var writes [][]metav1.Condition
	own := []string{"10.1.0.0/24"}
	v := newParentView(func(_ context.Context, conds ...metav1.Condition) { writes = append(writes, conds) },
		func() ([]string, error) { return own, nil })
	node := func(annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Annotations: annotations}}
	}
	decorated := map[string]string{
		api.AnnotationAppliedTaints:   "[]",
		api.AnnotationParentVersion:   "1.2.3 (abc)",
		api.AnnotationParentProtocols: api.OwnProtocols().String(),
		api.AnnotationPodCIDROverlap:  api.PodCIDROverlapNone,
		api.AnnotationPodCIDRsRefused: api.PodCIDROverlapNone,
	}
	isDecorated := func() bool {
		select {
		case <-v.decorated:
			return true
		default:
			return false
		}
	}

	v.observe(t.Context(), node(map[string]string{api.AnnotationClusterUID: "x"}))
	require.False(t, isDecorated(), "a node as this cluster registered it")
	v.observe(t.Context(), node(decorated))
	require.True(t, isDecorated())
	require.Empty(t, writes, "nothing is written before the Ready write")

	var withReady []metav1.Condition
	v.withReady(func(conds ...metav1.Condition) { withReady = conds })
	for typ, status := range map[string]metav1.ConditionStatus{
		v1alpha1.ConditionCompatible: metav1.ConditionTrue, v1alpha1.ConditionPodCIDRsDistinct: metav1.ConditionTrue, v1alpha1.ConditionPodCIDRsGranted: metav1.ConditionTrue,
	} {
		c := meta.FindStatusCondition(withReady, typ)
		require.NotNil(t, c, "the Ready write carries %s", typ)
		require.Equal(t, status, c.Status, "%s: %s", typ, c.Message)
	}
	require.Contains(t, meta.FindStatusCondition(withReady, v1alpha1.ConditionCompatible).Message, "1.2.3")

	v.observe(t.Context(), node(decorated))
	v.write(t.Context())
	require.Empty(t, writes, "the same verdicts are not written again")

	overlap := map[string]string{}
	for k, val := range decorated {
		overlap[k] = val
	}
	overlap[api.AnnotationPodCIDROverlap] = "10.1.0.0/24 (node west-1)"
	v.observe(t.Context(), node(overlap))
	require.Len(t, writes, 1, "a new verdict is written")
	require.Equal(t, metav1.ConditionFalse, meta.FindStatusCondition(writes[0], v1alpha1.ConditionPodCIDRsDistinct).Status)

	own = nil // this cluster's pod CIDRs change without the node
	v.write(t.Context())
	require.Len(t, writes, 2)
	require.Equal(t, v1alpha1.ReasonNoPodCIDRs, meta.FindStatusCondition(writes[1], v1alpha1.ConditionPodCIDRsDistinct).Reason)
}

// Without a decorated node the Ready write carries no verdict, and the
// first decorated node writes them.
func TestParentViewDecoratedAfterReady(t *testing.T) {
	var writes [][]metav1.Condition
	v := newParentView(func(_ context.Context, conds ...metav1.Condition) { writes = append(writes, conds) },
		func() ([]string, error) { return nil, nil })
	var withReady []metav1.Condition
	v.withReady(func(conds ...metav1.Condition) { withReady = conds })
	require.Empty(t, withReady)
	v.observe(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Annotations: map[string]string{api.AnnotationAppliedTaints: "[]"}}})
	require.Len(t, writes, 1)
	c := meta.FindStatusCondition(writes[0], v1alpha1.ConditionCompatible)
	require.NotNil(t, c)
	require.Contains(t, c.Message, "does not state its version", "a parent that decorates without stating its build is older than protocol ranges")
}
