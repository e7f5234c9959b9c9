package forward

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// origin is the value of api.AnnotationOrigin for a parent pod.
func origin(parentCluster string, pod *corev1.Pod) string {
	return parentCluster + "/" + string(pod.UID)
}

// delegateName is the name a delegate of pod gets when the pod's own name is
// taken in this cluster by a pod that is not its delegate: stable for one
// parent pod, so retries find it.
func delegateName(pod *corev1.Pod, taken bool) string {
	if !taken {
		return pod.Name
	}
	sum := sha256.Sum256([]byte(pod.UID))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	name := pod.Name
	if len(name)+len(suffix) > 253 {
		name = name[:253-len(suffix)]
	}
	return name + suffix
}

// buildDelegate returns the pod to create in this cluster for pod: its spec
// kept (selectors, affinity, tolerations, topology spread), node and status
// cleared, origin and path recorded, and owned by the Target so that no
// controller here adopts it and deleting the Target removes it.
func buildDelegate(pod *corev1.Pod, name string, c *Config, path []string) *corev1.Pod {
	d := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   c.Namespaces.Name(pod.Namespace),
			Labels:      maps.Clone(pod.Labels),
			Annotations: maps.Clone(pod.Annotations),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "nestlet.io/v1alpha1", Kind: "Target", Name: c.TargetName, UID: c.TargetUID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
			}},
		},
		Spec: *pod.Spec.DeepCopy(),
	}
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Labels[api.LabelTargetUID] = string(c.TargetUID)
	d.Annotations[api.AnnotationOrigin] = origin(c.ParentName, pod)
	d.Annotations[api.AnnotationPath] = strings.Join(path, ",")
	d.Annotations[api.AnnotationParentPod] = pod.Namespace + "/" + pod.Name
	d.Annotations[api.AnnotationResources] = resourcesDigest(pod)
	// The first hop records the original controller's kind; later hops
	// keep it (their pod's controller is a Target).
	if ref := metav1.GetControllerOf(pod); ref != nil && d.Annotations[api.AnnotationOwnerKind] == "" {
		d.Annotations[api.AnnotationOwnerKind] = ref.Kind
	}
	if owner := api.PodOwnerUID(pod); owner != "" {
		d.Annotations[api.AnnotationOwnerUID] = string(owner)
	}
	d.Spec.NodeName = ""
	// A pod is made without ephemeral containers: those the parent pod
	// has already are added after (UpdatePod).
	d.Spec.EphemeralContainers = nil
	unpinVirtualNode(d, c.ClusterName)
	if c.NodeLabels != nil {
		dropParentOnlyLabels(d, c.NodeLabels(), c.CarriedBelow)
	}
	if c.NodeAllocatable != nil {
		dropParentOnlyResources(d, c.NodeAllocatable(), c.ResourceBelow)
	}
	placeInDomains(d)
	// The priority value is computed again here from priorityClassName;
	// admission refuses a pod that brings its own.
	d.Spec.Priority = nil
	return d
}

// placeInDomains sends the delegate to the topology domains the parent's
// scheduler chose for it (api.AnnotationDomains), with a nodeSelector, and
// drops the topology spread constraints on those keys: they were judged
// where every domain and every matching pod is seen, and a level below,
// which sees only its own, would judge them again wrongly (its domains
// and pods are a part of them).
func placeInDomains(d *corev1.Pod) {
	domains := api.Domains(d)
	delete(d.Annotations, api.AnnotationDomains)
	if len(domains) == 0 {
		return
	}
	if d.Spec.NodeSelector == nil {
		d.Spec.NodeSelector = map[string]string{}
	}
	maps.Copy(d.Spec.NodeSelector, domains)
	kept := d.Spec.TopologySpreadConstraints[:0]
	for _, c := range d.Spec.TopologySpreadConstraints {
		if _, placed := domains[c.TopologyKey]; !placed {
			kept = append(kept, c)
		}
	}
	d.Spec.TopologySpreadConstraints = kept
	if len(kept) == 0 {
		d.Spec.TopologySpreadConstraints = nil
	}
}

// unpinVirtualNode drops from the delegate what pins the pod to the
// virtual node itself (kubernetes.io/hostname or metadata.name equal to
// this cluster's node name in the parent): the pod is on that node, and no
// node here bears its name. Pods a DaemonSet, an operator or
// `kubectl debug node` pin to a node by name would otherwise fit nowhere
// below.
func unpinVirtualNode(d *corev1.Pod, nodeName string) {
	dropNodeRequirements(d, func(r corev1.NodeSelectorRequirement, field bool) bool {
		key := corev1.LabelHostname
		if field {
			key = metav1.ObjectNameField
		}
		return r.Key == key && r.Operator == corev1.NodeSelectorOpIn && slices.Contains(r.Values, nodeName)
	})
}
