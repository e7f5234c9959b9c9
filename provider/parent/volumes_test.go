package parent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/nestlet/nestlet/api"
)

func volumesOver(t *testing.T, nodes ...*corev1.Node) (*volumes, *fake.Clientset) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	client := fake.NewClientset()
	for _, n := range nodes {
		require.NoError(t, idx.Add(n))
		_, err := client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return &volumes{client: client, nodes: corelisters.NewNodeLister(idx)}, client
}

func provisionOptions(node string) controller.ProvisionOptions {
	return controller.ProvisionOptions{
		StorageClass: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "nestlet"}, ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain)},
		PVName:       "pvc-c1",
		PVC: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app", UID: "c1"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
			}},
		SelectedNodeName: node,
	}
}

// A claim whose first pod goes to a child gets a volume pinned to the
// child's virtual node, recorded on the node before the volume exists;
// deleting the volume removes the record.
func TestVolumePinnedToTheChild(t *testing.T) {
	east := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{
		api.LabelNodeType: api.NodeTypeVirtualKubelet, api.LabelCluster: "east", corev1.LabelHostname: "east"}}}
	v, client := volumesOver(t, east)
	pv, state, err := v.Provision(t.Context(), provisionOptions("east"))
	require.NoError(t, err)
	require.Equal(t, controller.ProvisioningFinished, state)
	require.Equal(t, resource.MustParse("2Gi"), pv.Spec.Capacity[corev1.ResourceStorage])
	require.Equal(t, corev1.PersistentVolumeReclaimRetain, pv.Spec.PersistentVolumeReclaimPolicy)
	require.Equal(t, "nestlet", pv.Spec.StorageClassName)
	req := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	require.Equal(t, corev1.LabelHostname, req.Key)
	require.Equal(t, []string{"east"}, req.Values)
	n, err := client.CoreV1().Nodes().Get(t.Context(), "east", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "app/data", n.Annotations[api.AnnotationClaimPrefix+"c1"])

	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "app", Name: "data", UID: "c1"}
	require.NoError(t, v.Delete(t.Context(), pv))
	n, err = client.CoreV1().Nodes().Get(t.Context(), "east", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, n.Annotations, api.AnnotationClaimPrefix+"c1")

	// A child that has left: nothing to tell it.
	require.NoError(t, client.CoreV1().Nodes().Delete(t.Context(), "east", metav1.DeleteOptions{}))
	require.NoError(t, v.Delete(t.Context(), pv))
	// A volume that is not ours.
	var ignored *controller.IgnoredError
	require.ErrorAs(t, v.Delete(t.Context(), &corev1.PersistentVolume{}), &ignored)
}

// A pod sent to a node of this cluster's own, or a class that binds at
// once, gets an error that says what to use instead.
func TestVolumeRefusedOffChildren(t *testing.T) {
	real := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{api.LabelNodeType: "real"}}}
	v, client := volumesOver(t, real)
	_, state, err := v.Provision(t.Context(), provisionOptions("n1"))
	require.ErrorIs(t, err, errNotAChild)
	require.Equal(t, controller.ProvisioningReschedule, state)
	_, state, err = v.Provision(t.Context(), provisionOptions(""))
	require.ErrorContains(t, err, "WaitForFirstConsumer")
	require.Equal(t, controller.ProvisioningFinished, state)
	n, err := client.CoreV1().Nodes().Get(t.Context(), "n1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, n.Annotations)
}

// The provisioner made by NewVolumes (before anything decodes) watches
// nothing but the classes until the "nestlet" class exists, then makes
// the volume of a claim whose first pod went to a child.
func TestVolumesRunOnceTheClassExists(t *testing.T) {
	east := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{
		api.LabelNodeType: api.NodeTypeVirtualKubelet, api.LabelCluster: "east", corev1.LabelHostname: "east"}}}
	client := fake.NewClientset(east)
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, idx.Add(east))
	v := NewVolumes(t.Context(), client)
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.run(t.Context(), corelisters.NewNodeLister(idx))
	}()
	t.Cleanup(func() { <-done })

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app", UID: "c1", Annotations: map[string]string{
			"volume.kubernetes.io/selected-node":       "east",
			"volume.kubernetes.io/storage-provisioner": api.StorageProvisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(api.StorageClassName),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}}
	_, err := client.CoreV1().PersistentVolumeClaims("app").Create(t.Context(), claim, metav1.CreateOptions{})
	require.NoError(t, err)
	noVolumes := func() bool {
		pvs, err := client.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		return len(pvs.Items) == 0
	}
	// No class yet: the claim waits (its watch is not even started).
	time.Sleep(300 * time.Millisecond)
	require.True(t, noVolumes())

	_, err = client.StorageV1().StorageClasses().Create(t.Context(), &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: api.StorageClassName}, Provisioner: api.StorageProvisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !noVolumes() }, 30*time.Second, 50*time.Millisecond)
	pv, err := client.CoreV1().PersistentVolumes().Get(t.Context(), "pvc-c1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "east", pv.Labels[api.LabelCluster])
	require.Equal(t, "c1", string(pv.Spec.ClaimRef.UID))
}
