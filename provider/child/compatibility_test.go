package child

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/version"
)

// The child's Compatible condition names both builds, False when they
// share no protocol.
func TestCompatibility(t *testing.T) {
	node := func(a map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Annotations: a}}
	}
	c := compatibility(node(map[string]string{api.AnnotationParentVersion: "0.1.0 (abc)", api.AnnotationParentProtocols: api.OwnProtocols().String()}))
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Equal(t, v1alpha1.ReasonProtocolsMeet, c.Reason)
	require.Contains(t, c.Message, "the parent runs Nestlet 0.1.0 (abc)")
	require.Contains(t, c.Message, "this agent "+version.String())

	c = compatibility(node(map[string]string{api.AnnotationParentVersion: "5.0.0 (def)", api.AnnotationParentProtocols: "5-6"}))
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, v1alpha1.ReasonVersionSkew, c.Reason)
	require.Contains(t, c.Message, "the parent runs Nestlet 5.0.0 (def) (protocols 5-6), this agent "+version.String())

	// A parent from before protocols were stated speaks protocol 1.
	c = compatibility(node(nil))
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Contains(t, c.Message, "does not state its version")

	c = compatibility(node(map[string]string{api.AnnotationParentProtocols: "x"}))
	require.Equal(t, metav1.ConditionFalse, c.Status)
}
