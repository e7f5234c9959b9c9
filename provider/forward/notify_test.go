package forward

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// A parent pod resized in place is resized below, through the resize
// subresource (its resources change no other way), and only then: a
// delegate whose resources this cluster's admission changed (a
// LimitRange's default limits) is not resized back while the parent pod
// keeps its own.
func TestResizedInPlace(t *testing.T) {
	res := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	parentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "u1"},
		Spec:   corev1.PodSpec{NodeName: "leaf", Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: res("100m")}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	p, _ := runWithDelegate(t, parentPod, corev1.PodStatus{Phase: corev1.PodRunning})
	child := p.cfg.Child.(*fake.Clientset)
	// The delegate as it was made, then given a default limit here.
	d := buildDelegate(parentPod, "web", &p.cfg, []string{"mid", "leaf"})
	d.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	_, err := child.CoreV1().Pods("app").Update(t.Context(), d, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, p.delegates.GetStore().Update(d))
	resizes := func() int {
		n := 0
		for _, a := range child.Actions() {
			if a.GetSubresource() == "resize" {
				n++
			}
		}
		return n
	}

	labelled := parentPod.DeepCopy()
	labelled.Labels = map[string]string{"tier": "new"}
	require.NoError(t, p.UpdatePod(t.Context(), labelled))
	require.Zero(t, resizes(), "the parent pod was not resized")

	resized := labelled.DeepCopy()
	resized.Spec.Containers[0].Resources = res("200m")
	require.NoError(t, p.UpdatePod(t.Context(), resized))
	require.Equal(t, 1, resizes())
	got, err := child.CoreV1().Pods("app").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, res("200m"), got.Spec.Containers[0].Resources)
	require.Equal(t, resourcesDigest(resized), got.Annotations[api.AnnotationResources])
	require.Equal(t, "new", got.Labels["tier"])
	require.NoError(t, p.delegates.GetStore().Update(got))
	require.False(t, delegateBehind(resized, got), "in step once resized")
}

// An ephemeral container added to the parent pod (kubectl debug) is added
// to its delegate through the ephemeralcontainers subresource, once.
func TestEphemeralContainerAdded(t *testing.T) {
	parentPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", UID: "u1"},
		Spec:   corev1.PodSpec{NodeName: "leaf", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	p, _ := runWithDelegate(t, parentPod, corev1.PodStatus{Phase: corev1.PodRunning})
	child := p.cfg.Child.(*fake.Clientset)
	d := buildDelegate(parentPod, "web", &p.cfg, []string{"mid", "leaf"})
	_, err := child.CoreV1().Pods("app").Update(t.Context(), d, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, p.delegates.GetStore().Update(d))

	debugged := parentPod.DeepCopy()
	debugged.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger", Image: "busybox"}, TargetContainerName: "app"}}
	require.True(t, delegateBehind(debugged, d), "virtual-kubelet is to call UpdatePod")
	require.NoError(t, p.UpdatePod(t.Context(), debugged))
	var added int
	for _, a := range child.Actions() {
		if a.GetSubresource() == "ephemeralcontainers" {
			added++
		}
	}
	require.Equal(t, 1, added)
	d, err = child.CoreV1().Pods("app").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, debugged.Spec.EphemeralContainers, d.Spec.EphemeralContainers)
}

// The topology labels this cluster's API server gives a delegate from its
// node at binding (PodTopologyLabels) are the delegate's own: the parent
// pod, which has its parent's node's, never takes them off, and the
// delegate is in step (its status's observed generation is the parent's).
func TestTopologyLabelsFromBindingStay(t *testing.T) {
	parent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app", Generation: 1,
		Labels: map[string]string{"app": "web", "topology.kubernetes.io/region": "east"}}}
	d := parent.DeepCopy()
	d.Labels["topology.kubernetes.io/zone"] = "east-1"
	d.Labels[api.LabelTargetUID] = testTargetUID
	d.Annotations = map[string]string{}
	d.Status = corev1.PodStatus{Phase: corev1.PodRunning, ObservedGeneration: 1}
	require.False(t, delegateBehind(parent, d))
	require.EqualValues(t, 1, translateStatus(parent, d).ObservedGeneration)

	relabelled := parent.DeepCopy()
	relabelled.Labels["topology.kubernetes.io/zone"] = "mine"
	require.Equal(t, "mine", updatedDelegate(relabelled, d).Labels["topology.kubernetes.io/zone"], "the parent's own label wins")
}
