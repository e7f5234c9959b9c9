package summary

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/nestlet/nestlet/api"
)

// commonLabels returns the reportable labels with the same value on every
// counted node; empty without counted nodes.
func commonLabels(nodes []counted) map[string]string {
	out := map[string]string{}
	if len(nodes) == 0 {
		return out
	}
	for k, v := range nodes[0].node.Labels {
		if reportable(k) {
			out[k] = v
		}
	}
	for _, c := range nodes[1:] {
		for k, v := range out {
			if w, ok := c.node.Labels[k]; !ok || w != v {
				delete(out, k)
			}
		}
	}
	return out
}

// reportable reports whether a label key may be passed up to the virtual
// node: not one that names a node or a role or belongs to Nestlet or KWOK,
// and one the virtual node may set on itself.
func reportable(key string) bool {
	switch key {
	case corev1.LabelHostname, api.LabelNodeType:
		return false
	}
	for _, prefix := range []string{
		api.GroupName + "/",
		"node-role.kubernetes.io/",
		"kwok.x-k8s.io/",
		"node.kubernetes.io/exclude",
	} {
		if strings.HasPrefix(key, prefix) {
			return false
		}
	}
	return NodeMaySetLabel(key)
}

// NodeMaySetLabel reports whether the NodeRestriction admission plugin lets a
// node set label key on itself. It follows getForbiddenLabels in
// k8s.io/kubernetes/plugin/pkg/admission/noderestriction, whose helpers are
// unexported: node-restriction.kubernetes.io and its subdomains are
// forbidden, and so are kubernetes.io, k8s.io and their subdomains except
// for the labels kubeletapis.IsKubeletLabel allows.
func NodeMaySetLabel(key string) bool {
	ns := labelNamespace(key)
	if inDomain(ns, corev1.LabelNamespaceNodeRestriction) {
		return false
	}
	if inDomain(ns, "kubernetes.io") || inDomain(ns, "k8s.io") {
		return kubeletapis.IsKubeletLabel(key)
	}
	return true
}

// labelNamespace returns the prefix of a label key, "" if it has none.
func labelNamespace(key string) string {
	if ns, _, ok := strings.Cut(key, "/"); ok {
		return ns
	}
	return ""
}

// inDomain reports whether ns is domain or one of its subdomains.
func inDomain(ns, domain string) bool {
	return ns == domain || strings.HasSuffix(ns, "."+domain)
}
