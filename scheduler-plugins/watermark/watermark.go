// Package watermark is the Watermark scheduler plugin. A node is infeasible
// when a pod would lift its projected water level, requests over
// allocatable per resource, above the high watermark. For a virtual node the
// pod must also fit one of the largest free shapes of a summary group that
// matches it, after the pods bound since that summary was written are
// taken out of those shapes, so that bursts between reports do not
// over-commit a child; and a virtual node that asked to be avoided for the
// pod's owner (after one of its pods bounced back) is infeasible until then.
// Feasible nodes score by the projected level: lowest first (spread) or
// highest first (pack).
package watermark

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/pkg/quota"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config/validation"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/pluginargs"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// Name of the plugin in a scheduler profile.
const Name = "Watermark"

// Watermark implements fwk.FilterPlugin and fwk.ScorePlugin.
type Watermark struct {
	args      config.WatermarkArgs
	clock     clock.PassiveClock
	summaries virtualnode.SummaryCache
	// resources are the watched resources (HighWatermark's), sorted once.
	resources []corev1.ResourceName
	// recent keeps, per virtual node, what its pods bound since its last
	// report use, for the node's contents of one generation (see
	// boundSince).
	recent sync.Map // node name -> recentUse
	// quotas bound what a child's virtual node may take, whatever it
	// claims (api.QuotasConfigMap); nil without a client.
	quotas *quota.Watcher
}

var (
	_ fwk.PreFilterPlugin = &Watermark{}
	_ fwk.FilterPlugin    = &Watermark{}
	_ fwk.ScorePlugin     = &Watermark{}
	_ fwk.ScoreExtensions = &Watermark{}
)

// Mode says how nodes below the watermark are ranked.
type Mode = config.WatermarkMode

const (
	// Spread prefers the node whose projected water level is lowest.
	Spread = config.WatermarkSpread
	// Pack prefers the fullest node that stays below the watermark.
	Pack = config.WatermarkPack
)

// New takes the internal args (apis/config), or their v1 or raw form,
// defaults and validates them.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args := &config.WatermarkArgs{}
	if err := pluginargs.Decode(obj, args); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if err := pluginargs.ValidationError(validation.ValidateWatermarkArgs(nil, args)); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	pl := &Watermark{args: *args, clock: clock.RealClock{}, resources: sortedResources(args.HighWatermark)}
	if h != nil && h.ClientSet() != nil {
		pl.quotas = quota.New(h.ClientSet())
		go pl.quotas.Run(ctx)
		// Not fatal: until they are read, no pod goes to a virtual node
		// (fitsQuota), and the reflector says why.
		syncCtx, cancel := context.WithTimeout(ctx, quotaSyncWait)
		cache.WaitForCacheSync(syncCtx.Done(), pl.quotas.HasSynced)
		cancel()
	}
	return pl, nil
}

// Name returns the plugin's name.
func (*Watermark) Name() string { return Name }

// podRequests is what the pod asks for, one pod included.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return req
}

// amount is a quantity in the unit the scheduler counts it in (milli-CPU,
// bytes, count).
func amount(r corev1.ResourceName, q resource.Quantity) int64 {
	if r == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// used is what the node's pods request of r, as the scheduler counts it.
func used(nodeInfo fwk.NodeInfo, r corev1.ResourceName) int64 {
	req := nodeInfo.GetRequested()
	switch r {
	case corev1.ResourceCPU:
		return req.GetMilliCPU()
	case corev1.ResourceMemory:
		return req.GetMemory()
	case corev1.ResourceEphemeralStorage:
		return req.GetEphemeralStorage()
	case corev1.ResourcePods:
		return int64(len(nodeInfo.GetPods()))
	}
	return req.GetScalarResources()[r]
}

// allocated is a node's allocatable as the scheduler counts it: for a real
// node, its NodeInfo's (computed once per node change); for a virtual
// node, its quota's clamp (allocatable).
func (pl *Watermark) allocated(nodeInfo fwk.NodeInfo, r corev1.ResourceName) int64 {
	node := nodeInfo.Node()
	if virtualnode.IsVirtual(node) {
		return amount(r, pl.allocatable(node)[r])
	}
	a := nodeInfo.GetAllocatable()
	switch r {
	case corev1.ResourceCPU:
		return a.GetMilliCPU()
	case corev1.ResourceMemory:
		return a.GetMemory()
	case corev1.ResourceEphemeralStorage:
		return a.GetEphemeralStorage()
	case corev1.ResourcePods:
		return int64(a.GetAllowedPodNumber())
	}
	return a.GetScalarResources()[r]
}

// level returns the projected water level of r with the pod on the node,
// the pod asking want of r, and false when the node has none of r.
func (pl *Watermark) level(nodeInfo fwk.NodeInfo, r corev1.ResourceName, want int64) (float64, bool) {
	alloc := pl.allocated(nodeInfo, r)
	if alloc <= 0 {
		return 0, false
	}
	return float64(used(nodeInfo, r)+want) / float64(alloc), true
}

const stateKey fwk.StateKey = Name + "/requests"

// requestsState is what a cycle computes once about its pod.
type requestsState struct {
	req corev1.ResourceList
	// amounts are req's of the watched resources (Watermark.resources),
	// in the scheduler's units.
	amounts []int64
}

func (s *requestsState) Clone() fwk.StateData { return s }

// PreFilter computes the pod's requests once per scheduling cycle.
func (pl *Watermark) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(stateKey, pl.requests(pod))
	return nil, nil
}

func (pl *Watermark) requests(pod *corev1.Pod) *requestsState {
	s := &requestsState{req: podRequests(pod), amounts: make([]int64, len(pl.resources))}
	for i, r := range pl.resources {
		s.amounts[i] = amount(r, s.req[r])
	}
	return s
}

// PreFilterExtensions returns nil: the plugin keeps no per-node state.
func (pl *Watermark) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// requestsOf returns what PreFilter stored, or computes it.
func (pl *Watermark) requestsOf(state fwk.CycleState, pod *corev1.Pod) *requestsState {
	if state != nil {
		if v, err := state.Read(stateKey); err == nil {
			return v.(*requestsState)
		}
	}
	return pl.requests(pod)
}

// Filter applies the watermark, the cooldown and, for virtual nodes, the
// largest free shapes and the free capacity left after recent bindings.
func (pl *Watermark) Filter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	virtual := virtualnode.IsVirtual(node)
	if virtual {
		if until, avoided := virtualnode.AvoidedUntil(node, pod, pl.clock.Now()); avoided {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: asks to be avoided for this pod's owner until %s (one of its pods bounced back)",
				node.Name, until.UTC().Format(time.RFC3339)))
		}
	}
	rs := pl.requestsOf(state, pod)
	req := rs.req
	if st := pl.fitsQuota(node, req, nodeInfo); !st.IsSuccess() {
		return st
	}
	for i, r := range pl.resources {
		wm := pl.args.HighWatermark[r]
		lvl, ok := pl.level(nodeInfo, r, rs.amounts[i])
		if !ok {
			if rs.amounts[i] > 0 {
				return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: has no %s", node.Name, r))
			}
			continue
		}
		if lvl > wm+1e-9 {
			// No '%' in a reason: kube-scheduler passes the reasons to its
			// event recorder as a format.
			msg := fmt.Sprintf("%s: %s would reach %.0f percent of its allocatable, above the high watermark of %.0f percent", node.Name, r, lvl*100, wm*100)
			if virtual {
				// Say also when no single node below has room: raising
				// the watermark would not help then.
				if s := pl.fitsSummary(pod, req, nodeInfo); !s.IsSuccess() {
					msg += "; " + strings.TrimPrefix(s.Message(), node.Name+": ")
				}
			}
			return fwk.NewStatus(fwk.Unschedulable, msg)
		}
	}
	if virtual {
		return pl.fitsSummary(pod, req, nodeInfo)
	}
	return nil
}

func sortedResources(m map[corev1.ResourceName]float64) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(m))
	for r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Score is the projected water level averaged over the watched resources,
// in millionths; NormalizeScore maps it onto the score range.
func (pl *Watermark) Score(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	rs := pl.requestsOf(state, pod)
	sum, n := 0.0, 0
	for i, r := range pl.resources {
		if lvl, ok := pl.level(nodeInfo, r, rs.amounts[i]); ok {
			sum += math.Min(lvl, 1)
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	raw := int64(sum / float64(n) * 1e6)
	if pl.args.Mode == Spread {
		raw = 1e6 - raw
	}
	return raw, nil
}

// ScoreExtensions returns the plugin, which normalises its scores.
func (pl *Watermark) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps the raw scores of this cycle onto [0, MaxNodeScore],
// lowest to highest, so that one pod's difference between two nodes decides
// rather than being rounded away.
func (pl *Watermark) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	if len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = fwk.MaxNodeScore
			continue
		}
		scores[i].Score = (scores[i].Score - lo) * fwk.MaxNodeScore / (hi - lo)
	}
	return nil
}
