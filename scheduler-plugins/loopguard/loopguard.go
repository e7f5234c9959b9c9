// Package loopguard is the LoopGuard scheduler plugin: a virtual node is
// infeasible for a pod that has already passed through its cluster (its
// nestlet.io/path names it), or that would then have been forwarded more
// times than the hop limit. With it, cycles in the cluster graph never
// make a pod loop.
package loopguard

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "LoopGuard"

// Args of LoopGuard.
type Args struct {
	metav1.TypeMeta `json:",inline"`
	// HopLimit is the most times a pod may be forwarded (default 8, as the
	// agent's).
	HopLimit int `json:"hopLimit,omitempty"`
}

var _ runtime.Object = &Args{}

// DeepCopyObject makes *Args a runtime.Object, so that a profile built in
// Go may pass it to New as is.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	out := *a
	return &out
}

// LoopGuard implements fwk.FilterPlugin.
type LoopGuard struct{ hopLimit int }

var _ fwk.FilterPlugin = &LoopGuard{}

// New decodes, defaults and validates the arguments.
func New(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	args := Args{}
	switch a := obj.(type) {
	case nil:
	case *Args:
		if a != nil {
			args = *a
		}
	default:
		if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
			return nil, fmt.Errorf("%s args: %w", Name, err)
		}
	}
	if args.HopLimit == 0 {
		args.HopLimit = api.DefaultHopLimit
	}
	if args.HopLimit < 1 {
		return nil, fmt.Errorf("%s args: hopLimit must be at least 1, got %d", Name, args.HopLimit)
	}
	return &LoopGuard{hopLimit: args.HopLimit}, nil
}

// Name returns the plugin's name.
func (*LoopGuard) Name() string { return Name }

// Filter refuses virtual nodes that would make the pod loop or go too deep.
func (pl *LoopGuard) Filter(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	cluster := virtualnode.Cluster(nodeInfo.Node())
	if cluster == "" {
		return nil
	}
	path := api.PodPath(pod)
	if slices.Contains(path, cluster) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("%s: the pod has already passed through cluster %s (path %s)", nodeInfo.Node().Name, cluster, strings.Join(path, ",")))
	}
	if hops := api.HopsTo(path); hops > pl.hopLimit {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("%s: forwarding the pod again would make %d hops, more than the limit %d", nodeInfo.Node().Name, hops, pl.hopLimit))
	}
	return nil
}
