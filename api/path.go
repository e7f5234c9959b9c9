package api

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultHopLimit bounds how many times a pod is forwarded, for the
// provider and the LoopGuard scheduler plugin alike.
const DefaultHopLimit = 8

// PodPath returns the clusters a pod has passed through (its AnnotationPath
// annotation, itself last), nil for a pod created where it is.
func PodPath(pod *corev1.Pod) []string { return ObjectPath(pod) }

// ObjectPath returns the clusters an object made by Nestlet (a delegate
// pod, a reflected Service) has passed through, itself last; nil for an
// object created where it is.
func ObjectPath(obj metav1.Object) []string {
	raw := obj.GetAnnotations()[AnnotationPath]
	if raw == "" {
		return nil
	}
	return strings.Split(raw, ",")
}

// HopsTo returns how many times a pod with path would have been forwarded
// once it reaches one more cluster.
func HopsTo(path []string) int {
	if len(path) == 0 {
		return 1 // created in the parent: parent -> child
	}
	return len(path)
}

// PodOwnerUID returns the UID of the controller of the pod where it was
// first created: the AnnotationOwnerUID a delegate carries, or the pod's own
// controller; "" for a pod without one.
func PodOwnerUID(pod *corev1.Pod) types.UID {
	if uid := pod.Annotations[AnnotationOwnerUID]; uid != "" {
		return types.UID(uid)
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return ref.UID
	}
	return ""
}
