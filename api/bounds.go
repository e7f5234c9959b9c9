package api

import corev1 "k8s.io/api/core/v1"

// MaxChildAnnotationBytes bounds each annotation a child writes on its
// virtual node that its parent reads (the avoid list, desired taints,
// gateway key and peer state, leaving mark), the summary aside
// (MaxSummaryBytes): a child may write up to the API server's 256 KiB, and
// the parent's scheduler and agent read them at every change.
const MaxChildAnnotationBytes = 16 << 10

// ChildAnnotation returns annotation key of a child's virtual node n, and
// false when it is absent or larger than MaxChildAnnotationBytes (then not
// read at all, as if the child had not written it).
func ChildAnnotation(n *corev1.Node, key string) (string, bool) {
	v, ok := n.Annotations[key]
	if !ok || len(v) > MaxChildAnnotationBytes {
		return "", false
	}
	return v, true
}

// Leaving reports whether the child of virtual node n asked to leave: it
// marked n with AnnotationLeaving, set to its own AnnotationClusterUID
// (the child marks, the parent's agent deletes the node).
func Leaving(n *corev1.Node) bool {
	uid, _ := ChildAnnotation(n, AnnotationLeaving)
	return uid != "" && uid == n.Annotations[AnnotationClusterUID]
}
