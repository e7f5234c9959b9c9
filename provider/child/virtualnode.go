package child

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/vnode"
)

// newVirtualNode returns the provider of t's virtual node (provider/vnode):
// its summary from this cluster's nodes and pods, reported to the parent
// through nodeClient with the node identity. cfg brings what the run and
// the agent give it (listers, readiness, callbacks, the kubelet endpoint);
// what comes from the Target is set here.
func newVirtualNode(t *v1alpha1.Target, nodeClient kubernetes.Interface, cfg vnode.Config) (*vnode.Provider, error) {
	nodes := nodeClient.CoreV1().Nodes()
	cfg.ClusterName = t.Spec.ClusterName
	cfg.Labels, cfg.Taints, cfg.Limits = t.Spec.Labels, t.Spec.Taints, t.Spec.Limits
	cfg.ReportFrequency = reportFrequency(t)
	cfg.PatchSummary = func(ctx context.Context, sum string) error {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationSummary: sum}}})
		if err != nil {
			return err
		}
		_, err = nodes.Patch(ctx, t.Spec.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManager})
		return err
	}
	return vnode.New(cfg)
}

// sharePercent is the share of this cluster's free capacity offered to
// t's parent: spec.capacityPercent, or an even split between the targets
// Targets of this cluster, so that ancestors common to several parents
// count it once.
func sharePercent(t *v1alpha1.Target, targets int) int {
	if p := t.Spec.CapacityPercent; p != nil {
		return int(*p)
	}
	if targets <= 1 {
		return 100
	}
	return max(1, 100/targets)
}
