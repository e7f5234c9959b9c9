package proxy

import "github.com/nestlet/nestlet/pkg/permissions"

// Permissions are what the proxy does in its cluster; the chart grants
// exactly these (charts/nestlet/templates/proxy-rbac.yaml, checked by
// test/e2e/chart).
var Permissions = []permissions.Rule{
	{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"},
		Why: "a request for a pod is routed to the tunnel of the node it is bound to (kubelet.go)"},
	{BoundRole: "system:auth-delegator",
		Why: "the API server's kubelet client and other callers are authenticated and authorized by TokenReview and SubjectAccessReview"},
	{Namespace: "kube-public", APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"nestlet-info", "cluster-info"},
		Verbs: []string{"get", "update"},
		Why:   "its endpoints are published in kube-public/nestlet-info for the children (bootstrap/)"},
	{Namespace: "kube-public", APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"nestlet-proxy-ports"},
		Verbs: []string{"get", "list", "watch", "update"},
		Why:   "each child's virtual node is given a kubelet port of its own (--node-ports), recorded for every replica (nodeports.go)"},
	{Namespace: "kube-public", APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"},
		Why: "kube-public/nestlet-info and nestlet-proxy-ports are created when missing (create cannot name its object)"},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list", "watch"},
		Why: "with --service-node-ports, the node ports of the NodePort and LoadBalancer Services are served (servicenodeports.go)"},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"},
		Why: "with --service-node-ports, a node port's connections go to its Service's endpoints (servicenodeports.go)"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"},
		Why: "with replicas, each finds the others in its peers Service's EndpointSlices (peers.go)"},
	{Namespace: "kube-system", APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"nestlet-revoked"},
		Verbs: []string{"get", "list", "watch"},
		Why:   "the tunnels of children cut off with nestctl revoke are closed and refused (guard.go)"},
}
