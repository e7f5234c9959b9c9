package child

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/version"
)

// Version skew (api/protocol.go), the child's side: the parent states its
// build and protocols on this cluster's virtual node when it decorates it
// (provider/parent/skew.go); the Target's Compatible condition says
// whether the two meet.

// compatibility is the child's view of its own node in the parent: the
// Target's Compatible condition.
func compatibility(n *corev1.Node) metav1.Condition {
	cond := metav1.Condition{Type: v1alpha1.ConditionCompatible, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonProtocolsMeet}
	parent := api.VersionOf(n.Annotations, api.AnnotationParentVersion)
	theirs, err := api.ProtocolsIn(n.Annotations, api.AnnotationParentProtocols)
	ours := api.OwnProtocols()
	switch {
	case err != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonVersionSkew
		cond.Message = fmt.Sprintf("the parent states unreadable protocols (%v); this agent runs Nestlet %s (protocols %s)", err, version.String(), ours)
	case !ours.Meets(theirs):
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonVersionSkew
		cond.Message = fmt.Sprintf("the parent runs Nestlet %s (protocols %s), this agent %s (protocols %s): they share no protocol, so the parent places nothing new here (taint %s); upgrade the older side",
			parent, theirs, version.String(), ours, api.TaintKeyVersionSkew)
	default:
		cond.Message = fmt.Sprintf("the parent runs Nestlet %s (protocols %s), this agent %s (protocols %s)", parent, theirs, version.String(), ours)
	}
	return cond
}
