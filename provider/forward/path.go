package forward

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
)

// DefaultHopLimit bounds how many times a pod is forwarded.
const DefaultHopLimit = api.DefaultHopLimit

// nextPath returns the path of the delegate of pod: the pod's own path (or
// the parent cluster's name, for a pod created in the parent) followed by
// this cluster. It refuses a pod that has already passed through this
// cluster (a loop) or that would exceed the hop limit.
func nextPath(pod *corev1.Pod, parent, self string, hopLimit int) ([]string, error) {
	path, err := nextObjectPath(pod, parent, self, hopLimit)
	if err != nil {
		return nil, fmt.Errorf("pod %w", err)
	}
	return path, nil
}

// nextObjectPath is nextPath for any object Nestlet forwards (a pod, a
// Service).
func nextObjectPath(obj metav1.Object, parent, self string, hopLimit int) ([]string, error) {
	path := api.ObjectPath(obj)
	if len(path) == 0 {
		path = []string{parent}
	}
	if slices.Contains(path, self) {
		return nil, fmt.Errorf("has already passed through cluster %s (path %s): forwarding it again would loop", self, strings.Join(path, ","))
	}
	next := append(slices.Clone(path), self)
	if hops := len(next) - 1; hops > hopLimit {
		return nil, fmt.Errorf("would be forwarded %d times (path %s), more than the hop limit %d", hops, strings.Join(next, ","), hopLimit)
	}
	return next, nil
}
