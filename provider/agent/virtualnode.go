package agent

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/provider/vnode"
)

// newProvider returns the virtual node's provider: its summary from this
// cluster's nodes and pods, reported to the parent with the node identity.
func (r *targetRun) newProvider(ctx context.Context, id *join.Identity, nodeClient kubernetes.Interface, kubeletEndpoint func() (string, int32), changed <-chan struct{}) (*vnode.Provider, error) {
	t := r.target
	nodes := nodeClient.CoreV1().Nodes()
	return vnode.New(vnode.Config{
		ClusterName:  t.Spec.ClusterName,
		ClusterUID:   r.a.clusterUID,
		ParentName:   parentName(id, t),
		GroupKeys:    r.a.cfg.GroupKeys,
		SharePercent: r.sharePercent,
		Parents:      func() int { return len(r.a.targetLister.ListKeys()) },
		Reconnected: func(time.Duration) {
			select {
			case r.reconnected <- struct{}{}:
			default:
			}
		},
		Labels:          t.Spec.Labels,
		Taints:          t.Spec.Taints,
		ReportFrequency: reportFrequency(t),
		Nodes:           r.a.nodes,
		Pods:            r.a.pods,
		Changed:         changed,
		Ready:           r.a.readiness.ready,
		Reported:        func(at time.Time) { r.reported(ctx, at) },
		KubeletEndpoint: kubeletEndpoint,
		PatchSummary: func(ctx context.Context, sum string) error {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationSummary: sum}}})
			if err != nil {
				return err
			}
			_, err = nodes.Patch(ctx, t.Spec.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
			return err
		},
		Clock: r.a.cfg.Clock,
	})
}

// sharePercent is the share of this cluster's free capacity offered to
// the Target's parent: spec.capacityPercent, or an even split between this
// cluster's Targets, so that ancestors common to several parents count it
// once.
func (r *targetRun) sharePercent() int {
	if p := r.target.Spec.CapacityPercent; p != nil {
		return int(*p)
	}
	n := len(r.a.targetLister.ListKeys())
	if n <= 1 {
		return 100
	}
	return max(1, 100/n)
}
