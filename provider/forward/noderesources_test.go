package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// An extended resource advertised on the virtual node alone leaves the
// delegate's requests and limits; one a node below has, CPU and memory
// stay; an in-place resize keeps it out.
func TestDropParentOnlyResources(t *testing.T) {
	q := resource.MustParse
	rr := func() corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), "example.com/licence": q("2"), "nvidia.com/gpu": q("1")},
			Limits:   corev1.ResourceList{"example.com/licence": q("2"), "nvidia.com/gpu": q("1")},
		}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: rr()}},
		InitContainers: []corev1.Container{{Name: "i", Resources: rr()}}, Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/licence": q("2")}}}}
	alloc := corev1.ResourceList{corev1.ResourceCPU: q("8"), "example.com/licence": q("5"), "nvidia.com/gpu": q("1")}
	below := func(r corev1.ResourceName) bool { return r == "nvidia.com/gpu" }

	d := pod.DeepCopy()
	dropParentOnlyResources(d, nil, below)
	require.Equal(t, pod, d, "the node not seen yet: nothing dropped")
	dropParentOnlyResources(d, alloc, below)
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: q("1"), "nvidia.com/gpu": q("1")},
		Limits:   corev1.ResourceList{"nvidia.com/gpu": q("1")},
	}
	require.Equal(t, want, d.Spec.Containers[0].Resources)
	require.Equal(t, want, d.Spec.InitContainers[0].Resources)
	require.Empty(t, d.Spec.Resources.Requests)

	// Resized at the parent (CPU): the delegate takes the new CPU, never
	// the licence back.
	resized := pod.DeepCopy()
	resized.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = q("2")
	next := d.DeepCopy()
	setResources(next, resized)
	keepExtendedResources(next, d)
	want.Requests[corev1.ResourceCPU] = q("2")
	require.Equal(t, want, next.Spec.Containers[0].Resources)
}
