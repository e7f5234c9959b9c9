package forward

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nestlet/nestlet/api"
)

// dropParentOnlyResources drops from the delegate's requests and limits the
// extended resources that are this cluster's virtual node's in the parent
// rather than its nodes': one its admin advertised on the virtual node
// there (a PATCH of the node's status capacity, as
// https://kubernetes.io/docs/tasks/administer-cluster/extended-resource-node/
// shows for a node: "this cluster holds 4 licences"), which no node of
// this cluster has. The parent's scheduler counted them against the
// virtual node, which holds them; kept, they would fit no node here.
// allocatable is the virtual node's in the parent (nil: not seen yet,
// nothing dropped); carried reports whether some node here has resource r.
func dropParentOnlyResources(d *corev1.Pod, allocatable corev1.ResourceList, carried func(r corev1.ResourceName) bool) {
	if len(allocatable) == 0 || carried == nil {
		return
	}
	drop := map[corev1.ResourceName]bool{}
	for r := range allocatable {
		if api.IsExtendedResource(r) && !carried(r) {
			drop[r] = true
		}
	}
	if len(drop) == 0 {
		return
	}
	strip := func(rr *corev1.ResourceRequirements) {
		for r := range drop {
			delete(rr.Requests, r)
			delete(rr.Limits, r)
		}
	}
	for i := range d.Spec.Containers {
		strip(&d.Spec.Containers[i].Resources)
	}
	for i := range d.Spec.InitContainers {
		strip(&d.Spec.InitContainers[i].Resources)
	}
	if d.Spec.Resources != nil {
		strip(d.Spec.Resources)
	}
}

// keepExtendedResources removes from want's containers the extended
// resources the delegate d's containers do not ask for: those dropped as
// the virtual node's when d was made (dropParentOnlyResources). Extended
// resources cannot be resized, so a pod's never change after.
func keepExtendedResources(want, d *corev1.Pod) {
	for _, cs := range []struct{ want, d []corev1.Container }{
		{want.Spec.Containers, d.Spec.Containers}, {want.Spec.InitContainers, d.Spec.InitContainers},
	} {
		for i := range cs.want {
			if i >= len(cs.d) {
				continue
			}
			had := cs.d[i].Resources
			for _, l := range []corev1.ResourceList{cs.want[i].Resources.Requests, cs.want[i].Resources.Limits} {
				for r := range l {
					_, req := had.Requests[r]
					_, lim := had.Limits[r]
					if api.IsExtendedResource(r) && !req && !lim {
						delete(l, r)
					}
				}
			}
		}
	}
}
