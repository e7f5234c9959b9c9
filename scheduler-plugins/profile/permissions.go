package profile

import "github.com/nestlet/nestlet/pkg/permissions"

// Permissions are what nestlet-scheduler does in its cluster; the chart
// grants exactly these (charts/nestlet/templates/scheduler-rbac.yaml,
// checked by test/e2e/chart). Leader election names its Lease
// "<fullname>-scheduler" in the release namespace, never kube-scheduler's.
var Permissions = []permissions.Rule{
	{BoundRole: "system:kube-scheduler", Why: "what kube-scheduler does: pods, bindings, nodes, events, creating its Lease"},
	{BoundRole: "system:volume-scheduler", Why: "kube-scheduler's volume binding"},
	{Namespace: "kube-system", BoundRole: "extension-apiserver-authentication-reader",
		Why: "its secure port authenticates callers with the cluster's front proxy CA"},
	{Namespace: "kube-system", APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"nestlet-quotas"},
		Verbs: []string{"get", "list", "watch"},
		Why:   "the Watermark plugin bounds each child by its quota (pkg/quota)"},
	{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"create", "delete"},
		Why: "the Reservation plugin asks a child's agent for a place before binding a pod to its virtual node, and withdraws it (nodes/<name>/proxy/reserve)"},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"patch"},
		Why: "the Reservation plugin says on a pod held for a parent where it holds it (nestlet.io/reserved-on)"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		ResourceNames: []string{LeaseNamePlaceholder}, Verbs: []string{"get", "list", "watch", "update"},
		Why: "leader election among replicas (scheduler.leaderElect)"},
}

// LeaseNamePlaceholder in Permissions is the scheduler's Lease,
// "<fullname>-scheduler" of the release.
const LeaseNamePlaceholder = "<fullname>-scheduler"
