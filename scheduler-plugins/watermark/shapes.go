package watermark

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"

	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nestlet/nestlet/scheduler-plugins/virtual"
)

// fitsShapes checks the pod against the largest free shapes of the summary
// groups that match it, after taking out the pods bound to the virtual node
// since the summary was written. Without a summary or a matching group it
// leaves the verdict to SummaryAffinity.
func fitsShapes(pod *corev1.Pod, req corev1.ResourceList, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	s, ok := virtual.Summary(node)
	if !ok {
		return nil
	}
	groups := virtual.MatchingGroups(pod, node, s)
	if len(groups) == 0 {
		return nil
	}
	var shapes []corev1.ResourceList
	for _, g := range groups {
		for _, sh := range g.Shapes {
			shapes = append(shapes, sh.DeepCopy())
		}
	}
	sortShapes(shapes)
	at, err := time.Parse(time.RFC3339, s.Time)
	if err != nil {
		at = time.Time{}
	}
	for _, recent := range boundSince(nodeInfo, at) {
		place(shapes, recent)
	}
	for _, sh := range shapes {
		if fits(req, sh) {
			return nil
		}
	}
	if len(shapes) == 0 {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: no free node in the groups matching %s", node.Name, virtual.DescribeSelector(pod)))
	}
	sortShapes(shapes)
	r := shortfall(req, shapes[0])
	have := shapes[0][r]
	want := req[r]
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: largest free shape %s < %s", node.Name, describe(r, have), describe(r, want)))
}

// boundSince returns the requests of the pods on the node that the summary
// written at t cannot have counted: bound after it, or only assumed.
func boundSince(nodeInfo fwk.NodeInfo, t time.Time) []corev1.ResourceList {
	var out []corev1.ResourceList
	for _, pi := range nodeInfo.GetPods() {
		pod := pi.GetPod()
		if scheduledAt(pod).Before(t) {
			continue
		}
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		out = append(out, req)
	}
	sortShapes(out) // largest first: first-fit decreasing
	return out
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

// place takes req out of the first shape it fits (shapes sorted largest
// first); a request that fits none is taken out of the largest, clamped.
func place(shapes []corev1.ResourceList, req corev1.ResourceList) {
	if len(shapes) == 0 {
		return
	}
	target := shapes[0]
	for _, sh := range shapes {
		if fits(req, sh) {
			target = sh
			break
		}
	}
	for r, q := range req {
		cur, ok := target[r]
		if !ok {
			continue
		}
		cur.Sub(q)
		if cur.Sign() < 0 {
			cur = *resource.NewQuantity(0, cur.Format)
		}
		target[r] = cur
	}
	sortShapes(shapes)
}

// fits reports whether every non-zero request fits the shape; a resource the
// shape does not list is one its nodes do not have.
func fits(req, shape corev1.ResourceList) bool {
	return shortfall(req, shape) == ""
}

// shortfall returns a resource the shape lacks for req, "" if none.
func shortfall(req, shape corev1.ResourceList) corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(req))
	for r := range req {
		names = append(names, r)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
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

// sortShapes orders shapes largest first: CPU, then memory.
func sortShapes(shapes []corev1.ResourceList) {
	sort.SliceStable(shapes, func(i, j int) bool {
		a, b := shapes[i], shapes[j]
		if c := a.Cpu().Cmp(*b.Cpu()); c != 0 {
			return c > 0
		}
		return a.Memory().Cmp(*b.Memory()) > 0
	})
}

func describe(r corev1.ResourceName, q resource.Quantity) string {
	if r == corev1.ResourceCPU {
		return q.String() + " CPU"
	}
	return q.String() + " " + string(r)
}
