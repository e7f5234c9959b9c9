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
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config/validation"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/pluginargs"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "LoopGuard"

// LoopGuard implements fwk.FilterPlugin.
type LoopGuard struct{ hopLimit int }

var _ fwk.FilterPlugin = &LoopGuard{}

// New takes the internal args (apis/config), or their v1 or raw form,
// defaults and validates them.
func New(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	args := &config.LoopGuardArgs{}
	if err := pluginargs.Decode(obj, args); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if err := pluginargs.ValidationError(validation.ValidateLoopGuardArgs(nil, args)); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	return &LoopGuard{hopLimit: int(args.HopLimit)}, nil
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
