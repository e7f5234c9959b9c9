package api

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// IsExtendedResource reports whether r is an extended resource: a name with
// a domain outside kubernetes.io (as the API's own helper decides, without
// its validation of the name: the API server did it). An admin may
// advertise one on a virtual node (a PATCH of its status capacity): it is
// then the virtual node's, counted by the parent's scheduler against it and
// dropped from the delegates where no node below has it.
func IsExtendedResource(r corev1.ResourceName) bool {
	return strings.Contains(string(r), "/") && !strings.Contains(string(r), corev1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(string(r), corev1.DefaultResourceRequestsPrefix)
}
