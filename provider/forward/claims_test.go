package forward

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// claimEnv runs a Provider for the virtual node "leaf" of parent "mid",
// whose parent holds pod, its claim "data" (UID pc1, class nestlet) and
// the virtual node, with the volume's record on it when recorded.
func claimEnv(t *testing.T, pod *corev1.Pod, recorded bool, inChild ...*corev1.PersistentVolumeClaim) (*Provider, *fake.Clientset, *fake.Clientset, chan *corev1.Pod) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "leaf", Annotations: map[string]string{}}}
	if recorded {
		node.Annotations[api.AnnotationClaimPrefix+"pc1"] = "app/data"
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app", UID: "pc1", Labels: map[string]string{"tier": "db"},
			Annotations: map[string]string{"volume.kubernetes.io/selected-node": "leaf"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: ptr.To(api.StorageClassName),
			VolumeName:       "pvc-pc1",
		},
	}
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, parentPods.Add(pod))
	child := fake.NewClientset()
	for _, c := range inChild {
		_, err := child.CoreV1().PersistentVolumeClaims(c.Namespace).Create(t.Context(), c, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	parent := fake.NewClientset(pod, claim, node)
	p, err := New(Config{TargetName: "to-mid", TargetUID: testTargetUID, ClusterName: "leaf", ParentName: "mid",
		Parent: parent, ParentPods: corelisters.NewPodLister(parentPods), Child: child,
		Recorder: record.NewFakeRecorder(20), StorageClasses: map[string]string{api.StorageClassName: "fast"}})
	require.NoError(t, err)
	require.NoError(t, p.Run(t.Context()))
	got := make(chan *corev1.Pod, 10)
	p.NotifyPods(t.Context(), func(pod *corev1.Pod) { got <- pod })
	return p, parent, child, got
}

func claimPod() *corev1.Pod {
	pod := neverPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	return pod
}

// A pod's claim is made here before its delegate, of the same name, with
// the class the Target maps the parent's to; it stays while a delegate
// uses it or the parent's volume stands, and is deleted once neither.
func TestClaimFollowsThePod(t *testing.T) {
	pod := claimPod()
	p, parent, child, _ := claimEnv(t, pod, true)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	c, err := child.CoreV1().PersistentVolumeClaims("app").Get(t.Context(), "data", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "fast", ptr.Deref(c.Spec.StorageClassName, ""))
	require.Equal(t, "mid/pc1", c.Annotations[api.AnnotationOriginClaim])
	require.Equal(t, "true", c.Annotations[api.AnnotationClaimFollowsParent])
	require.Equal(t, "db", c.Labels["tier"])
	require.Equal(t, testTargetUID, c.Labels[api.LabelTargetUID])
	require.Empty(t, c.Spec.VolumeName, "bound here by this cluster's own provisioner")
	require.NotContains(t, c.Annotations, "volume.kubernetes.io/selected-node")
	require.Equal(t, resource.MustParse("1Gi"), c.Spec.Resources.Requests[corev1.ResourceStorage])
	d, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "data", d.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	// Made again for the next pod of the claim: nothing changes.
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))

	// The parent's volume is reclaimed: its record goes.
	_, err = parent.CoreV1().Nodes().Patch(t.Context(), "leaf", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"claim.nestlet.io/pc1":null}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitDelegates(t, p, 1)
	require.NoError(t, p.claims.collect(t.Context()))
	_, err = child.CoreV1().PersistentVolumeClaims("app").Get(t.Context(), "data", metav1.GetOptions{})
	require.NoError(t, err, "kept while its delegate uses it")

	require.NoError(t, child.CoreV1().Pods("app").Delete(t.Context(), "job-1", metav1.DeleteOptions{}))
	waitDelegates(t, p, 0)
	require.NoError(t, p.claims.collect(t.Context()))
	_, err = child.CoreV1().PersistentVolumeClaims("app").Get(t.Context(), "data", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "deleted once unused and its parent's volume gone: %v", err)
}

// A claim whose parent volume was not made by the parent's provisioner
// (no record on the virtual node) is never deleted here by Nestlet.
func TestClaimNotRecordedIsKept(t *testing.T) {
	pod := claimPod()
	p, _, child, _ := claimEnv(t, pod, false)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	require.NoError(t, child.CoreV1().Pods("app").Delete(t.Context(), "job-1", metav1.DeleteOptions{}))
	waitDelegates(t, p, 0)
	require.NoError(t, p.claims.collect(t.Context()))
	c, err := child.CoreV1().PersistentVolumeClaims("app").Get(t.Context(), "data", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, c.Annotations[api.AnnotationClaimFollowsParent])
}

// A claim of that name here that Nestlet did not make fails the pod with
// a reason that says so, and is left alone.
func TestClaimOfSomeoneElse(t *testing.T) {
	pod := claimPod()
	theirs := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app"}}
	p, _, child, got := claimEnv(t, pod, true, theirs)
	require.NoError(t, p.CreatePod(t.Context(), pod.DeepCopy()))
	select {
	case up := <-got:
		require.Equal(t, corev1.PodFailed, up.Status.Phase)
		require.Equal(t, api.ReasonClaimConflict, up.Status.Reason)
		require.Contains(t, up.Status.Message, "Nestlet did not make it")
	case <-time.After(10 * time.Second):
		t.Fatal("the pod was not failed")
	}
	_, err := child.CoreV1().Pods("app").Get(t.Context(), "job-1", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no delegate: %v", err)
	c, err := child.CoreV1().PersistentVolumeClaims("app").Get(t.Context(), "data", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, c.Annotations)
}

// waitDelegates waits until the delegate informer holds n delegates.
func waitDelegates(t *testing.T, p *Provider, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		l, err := p.lister.List(labels.Everything())
		return err == nil && len(l) == n
	}, 10*time.Second, 10*time.Millisecond)
}

// A Target's first run (Config.New) lists no claims at its first pass:
// none can exist yet. Once it made one, a pass lists them again.
func TestNewTargetListsNoClaimsUntilItMadeOne(t *testing.T) {
	child := fake.NewClientset()
	parentPods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	p, err := New(Config{TargetName: "to-mid", TargetUID: testTargetUID, ClusterName: "leaf", ParentName: "mid", New: true,
		Parent: fake.NewClientset(), ParentPods: corelisters.NewPodLister(parentPods), Child: child,
		Recorder: record.NewFakeRecorder(20)})
	require.NoError(t, err)
	lists := func() int {
		n := 0
		for _, a := range child.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "persistentvolumeclaims" {
				n++
			}
		}
		return n
	}
	require.NoError(t, p.claims.collect(t.Context()))
	require.Zero(t, lists(), "a new Target's first pass lists no claims")
	p.claims.made.Add(1)
	require.NoError(t, p.claims.collect(t.Context()))
	require.Equal(t, 1, lists(), "once it made a claim, a pass lists them")
}
