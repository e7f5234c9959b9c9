package watermark

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/quota"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// allocatable is what the watermark measures node against: its
// allocatable, and for a child's virtual node no more of each resource
// than the quota the parent set for it (api.QuotasConfigMap).
func (pl *Watermark) allocatable(node *corev1.Node) corev1.ResourceList {
	if node == nil {
		return nil
	}
	if !virtualnode.IsVirtual(node) {
		return node.Status.Allocatable
	}
	q, ok, err := pl.quotas.Of(node.Name)
	if err != nil || !ok {
		return node.Status.Allocatable
	}
	return quota.Clamp(node.Status.Allocatable, q)
}

// fitsQuota refuses a virtual node whose pods would request more than the
// quota the parent set for its child, whatever the child claims; and any
// pod at all while that quota does not parse (fail closed).
func (pl *Watermark) fitsQuota(node *corev1.Node, req corev1.ResourceList, nodeInfo fwk.NodeInfo) *fwk.Status {
	if !virtualnode.IsVirtual(node) {
		return nil
	}
	if pl.quotas != nil && !pl.quotas.HasSynced() {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the children's quotas (configmap %s/%s) are not read yet: nestlet-scheduler must be allowed to get, list and watch it",
			node.Name, metav1.NamespaceSystem, api.QuotasConfigMap))
	}
	q, ok, err := pl.quotas.Of(node.Name)
	if err != nil {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %v: fix it (nestctl quota %s RESOURCE=QUANTITY,...)", node.Name, err, node.Name))
	}
	if !ok {
		return nil
	}
	for _, r := range sortedNames(q) {
		limit := q[r]
		if want := used(nodeInfo, r) + amount(r, req[r]); want > amount(r, limit) && amount(r, req[r]) > 0 {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: its pods would request %s of %s, beyond the quota of %s its parent set (configmap %s/%s): raise it with nestctl quota %s %s=...",
				node.Name, quantity(r, want), r, limit.String(), metav1.NamespaceSystem, api.QuotasConfigMap, node.Name, r))
		}
	}
	return nil
}

// quotaSyncWait is how long New waits for the quotas to be read.
const quotaSyncWait = 10 * time.Second

// quantity prints an amount counted as the scheduler counts r.
func quantity(r corev1.ResourceName, v int64) string {
	if r == corev1.ResourceCPU {
		return fmt.Sprintf("%dm", v)
	}
	return fmt.Sprint(v)
}
