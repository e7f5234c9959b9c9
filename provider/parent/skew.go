package parent

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/version"
)

// Version skew (api/protocol.go): each side states on the child's virtual
// node its build and the protocols it reads, the child's agent when it
// registers the node, the parent's agent when it decorates it. Where they
// share none, the parent taints the node (nothing new is placed there) and
// the child's Target says so, naming both builds.

// versionSkew is the parent's view of a child's node: why the two do not
// meet, or "".
func versionSkew(n *corev1.Node) string {
	theirs, err := api.ProtocolsIn(n.Annotations, api.AnnotationProtocols)
	if err != nil {
		return fmt.Sprintf("child %s states unreadable protocols: %v", n.Name, err)
	}
	if ours := api.OwnProtocols(); !ours.Meets(theirs) {
		return fmt.Sprintf("child %s runs Nestlet %s (protocols %s), this cluster %s (protocols %s): upgrade the older side",
			n.Name, api.VersionOf(n.Annotations, api.AnnotationAgentVersion), theirs, version.String(), ours)
	}
	return ""
}

// withSkewTaint returns the taints to apply for a child: desired, with the
// skew taint when skew says the two do not meet (a child cannot ask for
// that taint, nor be rid of it).
func withSkewTaint(desired []corev1.Taint, skew string) []corev1.Taint {
	out := slices.DeleteFunc(slices.Clone(desired), func(t corev1.Taint) bool { return t.Key == api.TaintKeyVersionSkew })
	if skew != "" {
		out = append(out, corev1.Taint{Key: api.TaintKeyVersionSkew, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// versions is the decorator's part (sync): it states this side's build in
// annotations and patch, and returns desired with the skew taint when the
// child n shares no protocol with this cluster.
func (d *decorator) versions(ctx context.Context, n *corev1.Node, desired []corev1.Taint, annotations, patch map[string]string) []corev1.Taint {
	skew := versionSkew(n)
	if _, was := d.skewed.Load(n.Name); (skew != "") != was {
		if skew != "" {
			d.skewed.Store(n.Name, true)
			klog.FromContext(ctx).Info("Version skew: tainting the child's virtual node", "node", n.Name, "why", skew)
		} else {
			d.skewed.Delete(n.Name)
		}
	}
	for k, v := range parentAnnotations() {
		annotations[k] = v
		patch[k] = v
	}
	return withSkewTaint(desired, skew)
}

// parentAnnotations are what the parent states of itself on a child's node.
func parentAnnotations() map[string]string {
	return map[string]string{
		api.AnnotationParentVersion:   version.String(),
		api.AnnotationParentProtocols: api.OwnProtocols().String(),
	}
}
