package forward

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nestlet/nestlet/api"
)

// After a restart the delegate informer has synced before virtual-kubelet
// registers its callback: the first GetPod of a pod (virtual-kubelet's
// sync of it) reports its delegate's status, so that a delegate that went
// Running while the agent was down is reported; later ones do not repeat
// it.
func TestNotifyPodsReplaysExistingDelegates(t *testing.T) {
	parentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "u1"},
		Spec: corev1.PodSpec{NodeName: "leaf"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	p, got := runWithDelegate(t, parentPod, corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"})
	for range 3 {
		_, err := p.GetPod(t.Context(), "app", "web")
		require.NoError(t, err)
	}
	select {
	case pod := <-got:
		require.Equal(t, "web", pod.Name)
		require.Equal(t, corev1.PodRunning, pod.Status.Phase)
		require.Equal(t, "10.0.0.7", pod.Status.PodIP)
	case <-time.After(5 * time.Second):
		t.Fatal("the delegate's status was never sent")
	}
	// Every send GetPod started has finished: nothing more is on its way.
	p.replays.Wait()
	require.Empty(t, got, "sent again")
}

// runWithDelegate runs a Provider of cluster leaf under mid whose parent
// holds parentPod (app/web, UID u1) and this cluster its delegate with
// status st, and returns it with the channel of what it sends up.
func runWithDelegate(t *testing.T, parentPod *corev1.Pod, st corev1.PodStatus) (*Provider, chan *corev1.Pod) {
	t.Helper()
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, parentPods.Add(parentPod))
	child := fake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", Labels: map[string]string{api.LabelTargetUID: testTargetUID},
			Annotations: map[string]string{api.AnnotationParentPod: "app/web", api.AnnotationOrigin: "mid/app/web/u1"}},
		Status: st,
	})
	p, err := New(Config{TargetName: "to-mid", TargetUID: testTargetUID, ClusterName: "leaf", ParentName: "mid",
		Parent: fake.NewClientset(parentPod), ParentPods: corelisters.NewPodLister(parentPods), Child: child,
		Recorder: record.NewFakeRecorder(10), ChildRecorder: record.NewFakeRecorder(10)})
	require.NoError(t, err)
	require.NoError(t, p.Run(t.Context()))
	got := make(chan *corev1.Pod, 10)
	p.NotifyPods(t.Context(), func(pod *corev1.Pod) { got <- pod })
	return p, got
}

// virtual-kubelet calls UpdatePod only when GetPod's pod differs from the
// parent pod in what an update carries: GetPod shows the pod as its
// delegate has it while the delegate lags behind (a label or annotation
// changed at the parent, which a downward API volume below must show), and
// as the parent has it once UpdatePod carried the change.
func TestGetPodShowsADelegateBehind(t *testing.T) {
	parentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "u1"},
		Spec: corev1.PodSpec{NodeName: "leaf"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	p, _ := runWithDelegate(t, parentPod, corev1.PodStatus{Phase: corev1.PodRunning})
	same := func(a, b *corev1.Pod) bool {
		return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations)
	}
	got, err := p.GetPod(t.Context(), "app", "web")
	require.NoError(t, err)
	require.True(t, same(parentPod, got), "a delegate up to date: %v", got.ObjectMeta)

	// The parent's informer holds the pod runWithDelegate was given.
	changed := parentPod
	changed.Labels = map[string]string{"tier": "new"}
	changed.Annotations = map[string]string{"builder": "foo"}
	got, err = p.GetPod(t.Context(), "app", "web")
	require.NoError(t, err)
	require.False(t, same(changed, got), "the delegate lags behind: virtual-kubelet must call UpdatePod")

	require.NoError(t, p.UpdatePod(t.Context(), changed))
	d, err := p.cfg.Child.CoreV1().Pods("app").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "new", d.Labels["tier"])
	require.Equal(t, "foo", d.Annotations["builder"])
	require.Equal(t, "mid/app/web/u1", d.Annotations[api.AnnotationOrigin], "this level's own annotations stay")
	require.NoError(t, p.delegates.GetStore().Update(d))
	got, err = p.GetPod(t.Context(), "app", "web")
	require.NoError(t, err)
	require.True(t, same(changed, got), "carried down: %v", got.ObjectMeta)
}
