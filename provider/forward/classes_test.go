package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// A RuntimeClass a pod names is made here as the parent has it (handler,
// overhead, scheduling); one this cluster has already stays as it is; one
// the parent lacks is left to this cluster's admission.
func TestEnsureRuntimeClass(t *testing.T) {
	parentRC := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc",
		Overhead:   &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox": "yes"}}}
	ownRC := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata-here"}
	parent := fake.NewClientset(parentRC, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata-there"})
	child := fake.NewClientset(ownRC)
	p := &Provider{cfg: Config{Parent: parent, Child: child, ParentName: "root"}}
	podWith := func(rc string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "app"}, Spec: corev1.PodSpec{RuntimeClassName: ptr.To(rc)}}
	}
	for _, rc := range []string{"gvisor", "kata", "gone"} {
		require.NoError(t, p.ensureClasses(t.Context(), podWith(rc)), rc)
	}
	got, err := child.NodeV1().RuntimeClasses().Get(t.Context(), "gvisor", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "runsc", got.Handler)
	require.Equal(t, parentRC.Overhead, got.Overhead)
	require.Equal(t, parentRC.Scheduling, got.Scheduling)
	require.Equal(t, NamespaceManagedBy, got.Labels[LabelNamespaceManagedBy])
	kata, err := child.NodeV1().RuntimeClasses().Get(t.Context(), "kata", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "kata-here", kata.Handler, "this cluster's own class stays its own")
	_, err = child.NodeV1().RuntimeClasses().Get(t.Context(), "gone", metav1.GetOptions{})
	require.Error(t, err, "nothing made for a class the parent lacks")
}

// A PriorityClass a pod names is made here with the value the parent gave
// the pod; when the parent's class is made anew with another value, the
// copy is replaced; this cluster's own class of the name is never touched.
func TestEnsurePriorityClass(t *testing.T) {
	own := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Value: 7}
	child := fake.NewClientset(own)
	p := &Provider{cfg: Config{Parent: fake.NewClientset(), Child: child, ParentName: "root"}}
	podWith := func(class string, value int32) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "app"},
			Spec: corev1.PodSpec{PriorityClassName: class, Priority: ptr.To(value)}}
	}
	value := func(name string) int32 {
		pc, err := child.SchedulingV1().PriorityClasses().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		return pc.Value
	}
	require.NoError(t, p.ensureClasses(t.Context(), podWith("batch", 100)))
	require.Equal(t, int32(100), value("batch"))
	require.NoError(t, p.ensureClasses(t.Context(), podWith("batch", 100)))
	require.NoError(t, p.ensureClasses(t.Context(), podWith("batch", 500)), "the parent's class made anew")
	require.Equal(t, int32(500), value("batch"))
	require.NoError(t, p.ensureClasses(t.Context(), podWith("theirs", 1000)))
	require.Equal(t, int32(7), value("theirs"), "this cluster's own class stays its own")
	require.NoError(t, p.ensureClasses(t.Context(), podWith("system-node-critical", 2000001000)))
	_, err := child.SchedulingV1().PriorityClasses().Get(t.Context(), "system-node-critical", metav1.GetOptions{})
	require.Error(t, err, "the system classes are every cluster's own")
}
