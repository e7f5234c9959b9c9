package api

import "slices"

// SystemNamespaces are every cluster's own: its API server's and DNS's
// Services, its leases, its cluster info, Nestlet's identities. A parent
// keeps their pods (unless the namespace's AnnotationNamespaceClusters
// says otherwise), and a child never takes a parent's pod into its own
// (docs/tenants.md).
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", DefaultNamespace}

// IsSystemNamespace tells whether ns is one of SystemNamespaces.
func IsSystemNamespace(ns string) bool { return slices.Contains(SystemNamespaces, ns) }
