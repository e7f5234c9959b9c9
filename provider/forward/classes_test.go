package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
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
