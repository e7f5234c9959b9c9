package watermark

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/scheduler-plugins/internal/virtualnode"
)

// fitsSummary checks the pod against the summary groups of a virtual node
// that match it: it must fit one of their largest free shapes (a child with
// much free capacity in total but none on any single node cannot run it),
// and what is free in those groups, less the requests of the pods bound to
// the virtual node since the summary was written, must hold it (so a burst
// between two reports does not over-commit the child). Without a summary
// or a matching group it leaves the verdict to SummaryAffinity.
func (pl *Watermark) fitsSummary(pod *corev1.Pod, req corev1.ResourceList, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	s, at, ok := pl.summaries.Get(node)
	if !ok {
		return nil
	}
	groups := virtualnode.MatchingGroups(pod, node, s)
	if len(groups) == 0 {
		return nil
	}
	req = withoutNodeOwn(req, node, s)
	var largest corev1.ResourceList
	fitsOne := false
	free := map[corev1.ResourceName]int64{}
	names := sortedNames(req)
	for _, g := range groups {
		for _, sh := range g.Shapes {
			if !fitsOne && shortfall(names, req, sh) == "" {
				fitsOne = true
			}
			if largest == nil || larger(sh, largest) {
				largest = sh
			}
		}
		for r, q := range g.Free {
			free[r] += amount(r, q)
		}
	}
	if !fitsOne {
		if largest == nil {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: no free node in the groups matching %s", node.Name, virtualnode.DescribeSelector(pod)))
		}
		r := shortfall(names, req, largest)
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: largest free shape %s < %s", node.Name, describe(r, largest[r]), describe(r, req[r])))
	}
	recent, used := pl.boundSince(nodeInfo, at)
	for r, v := range used {
		free[r] -= v
	}
	for _, r := range names {
		want := amount(r, req[r])
		if want == 0 {
			continue
		}
		if free[r] < want {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: free %s in the groups matching %s, less %d pods bound since the last report, is %s < %s",
				node.Name, r, virtualnode.DescribeSelector(pod), recent, describe(r, fromAmount(r, max(free[r], 0))), describe(r, req[r])))
		}
	}
	return nil
}

// withoutNodeOwn returns req without the extended resources that are the
// virtual node's own rather than its subtree's: advertised on the node (an
// admin's PATCH of its status capacity) and held by no group of its
// summary. The built-in NodeResourcesFit counts those against the node;
// the child drops them from the delegate (provider/forward).
func withoutNodeOwn(req corev1.ResourceList, node *corev1.Node, s *api.Summary) corev1.ResourceList {
	var out corev1.ResourceList
	for r := range req {
		if _, on := node.Status.Allocatable[r]; !on || !api.IsExtendedResource(r) {
			continue
		}
		held := false
		for _, g := range s.Groups {
			if _, ok := g.Allocatable[r]; ok {
				held = true
				break
			}
		}
		if held {
			continue
		}
		if out == nil {
			out = req.DeepCopy()
		}
		delete(out, r)
	}
	if out == nil {
		return req
	}
	return out
}

// recentUse is what the pods of one generation of a node's contents bound
// since a summary's time request.
type recentUse struct {
	generation int64
	at         time.Time
	pods       int
	used       map[corev1.ResourceName]int64
}

// boundSince returns how many of the node's pods were bound at or after at
// (or are only assumed) and what they request, counted as the scheduler
// counts (milli-CPU, bytes, pods). A virtual node holds every pod sent to
// its child, thousands of them, and Filter asks this for every pod
// scheduled: the answer is kept until the node's contents change (the
// scheduler gives every change a new generation) or its summary does, so
// that each cycle counts again only the node the last pod went to. The
// returned map is shared: read it, never write it.
func (pl *Watermark) boundSince(nodeInfo fwk.NodeInfo, at time.Time) (int, map[corev1.ResourceName]int64) {
	name, gen := nodeInfo.Node().Name, nodeInfo.GetGeneration()
	if gen != 0 {
		if v, ok := pl.recent.Load(name); ok {
			if r := v.(recentUse); r.generation == gen && r.at.Equal(at) {
				return r.pods, r.used
			}
		}
	}
	r := recentUse{generation: gen, at: at, used: map[corev1.ResourceName]int64{}}
	for _, pi := range nodeInfo.GetPods() {
		if scheduledAt(pi.GetPod()).Before(at) {
			continue
		}
		r.pods++
		res := pi.CalculateResource().Resource
		r.used[corev1.ResourceCPU] += res.GetMilliCPU()
		r.used[corev1.ResourceMemory] += res.GetMemory()
		r.used[corev1.ResourceEphemeralStorage] += res.GetEphemeralStorage()
		r.used[corev1.ResourcePods]++
		for rn, v := range res.GetScalarResources() {
			r.used[rn] += v
		}
	}
	if gen != 0 {
		pl.recent.Store(name, r)
	}
	return r.pods, r.used
}

// scheduledAt is when the pod was bound (its PodScheduled condition), or
// the far future for a pod only assumed by this scheduler.
func scheduledAt(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Unix(1<<62, 0)
}

// shortfall returns a resource the shape lacks for req, "" if none; names
// are req's, sorted (sortedNames). A resource the shape does not list is
// one its nodes do not have.
func shortfall(names []corev1.ResourceName, req, shape corev1.ResourceList) corev1.ResourceName {
	for _, r := range names {
		q := req[r]
		if q.IsZero() {
			continue
		}
		have, ok := shape[r]
		if !ok || have.Cmp(q) < 0 {
			return r
		}
	}
	return ""
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for r := range l {
		names = append(names, r)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// larger orders shapes: more CPU, then more memory.
func larger(a, b corev1.ResourceList) bool {
	if c := a.Cpu().Cmp(*b.Cpu()); c != 0 {
		return c > 0
	}
	return a.Memory().Cmp(*b.Memory()) > 0
}

func fromAmount(r corev1.ResourceName, v int64) resource.Quantity {
	if r == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	if r == corev1.ResourceMemory || r == corev1.ResourceEphemeralStorage {
		return *resource.NewQuantity(v, resource.BinarySI)
	}
	return *resource.NewQuantity(v, resource.DecimalSI)
}

func describe(r corev1.ResourceName, q resource.Quantity) string {
	if r == corev1.ResourceCPU {
		return q.String() + " CPU"
	}
	return q.String() + " " + string(r)
}
