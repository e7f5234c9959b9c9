package child

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
)

// The Target says what its parent grants of its pod CIDRs, as the parent
// wrote it on the virtual node.
func TestPodCIDRsGranted(t *testing.T) {
	node := func(a map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Annotations: a}}
	}
	own := []string{"10.1.0.0/24"}
	tests := []struct {
		name       string
		node       *corev1.Node
		wantStatus metav1.ConditionStatus
		wantReason string
		wantIn     string
	}{
		{"not said yet", node(nil), metav1.ConditionUnknown, v1alpha1.ReasonPodCIDRCheckPending, "has not said"},
		{"all granted", node(map[string]string{api.AnnotationPodCIDRsRefused: api.PodCIDROverlapNone}), metav1.ConditionTrue, v1alpha1.ReasonPodCIDRsGranted, "grants pod CIDRs 10.1.0.0/24"},
		{"some refused", node(map[string]string{api.AnnotationPodCIDRsRefused: "not granted: 10.1.0.128/25 (held by cluster west)"}),
			metav1.ConditionFalse, v1alpha1.ReasonPodCIDRsRefused, "held by cluster west"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := podCIDRsGranted(own, tt.node)
			assert.Equal(t, v1alpha1.ConditionPodCIDRsGranted, c.Type)
			assert.Equal(t, tt.wantStatus, c.Status)
			assert.Equal(t, tt.wantReason, c.Reason)
			assert.Contains(t, c.Message, tt.wantIn)
		})
	}
}
