package parent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/nestlet/nestlet/api"
)

// volumes is this cluster's provisioner of the "nestlet" StorageClass
// (api.StorageProvisioner), for claims whose first pod the scheduler sent
// to a child's virtual node. The storage is the child's: the volume made
// here is pinned to the virtual node (node affinity on its hostname) so
// that every later pod of the claim goes there too, and the child, when
// the pod arrives, makes a claim of the same name that its own classes
// bind (provider/forward/claims.go), down to a leaf's real provisioner.
//
// The volume is recorded on the virtual node (api.AnnotationClaimPrefix)
// before it exists, and the record is removed when the volume is deleted:
// the child, which may read only its own node here, deletes its claim
// when the record goes. The provisioning controller, its retries and
// events are sig-storage-lib-external-provisioner's.
type volumes struct {
	client kubernetes.Interface
	nodes  corelisters.NodeLister
}

// Volumes is the provisioner of this cluster's "nestlet" StorageClass
// (api.StorageProvisioner), made by NewVolumes and run by the parent's
// side (Config.Volumes).
type Volumes struct {
	classes cache.SharedIndexInformer
	factory informers.SharedInformerFactory
	volumes *volumes
	pc      *controller.ProvisionController
}

// NewVolumes makes the provisioner; nothing is watched until it runs.
//
// Make it once per cluster, before any API client of the process decodes
// a response (before leader election, informers, the gateway): the
// provisioning library registers the core types in client-go's global
// scheme when its controller is made (controller.NewProvisionController),
// a write to the maps every client's decoder reads. Made while a watch
// decodes, the process dies ("concurrent map read and map write").
func NewVolumes(ctx context.Context, client kubernetes.Interface) *Volumes {
	factory := informers.NewSharedInformerFactory(client, 0)
	v := &Volumes{
		classes: factory.Storage().V1().StorageClasses().Informer(),
		factory: factory,
		volumes: &volumes{client: client},
	}
	v.pc = controller.NewProvisionController(ctx, client, api.StorageProvisioner, v.volumes,
		controller.ClassesInformer(v.classes),
		controller.LeaderElection(false),
		controller.FailedProvisionThreshold(0),
		controller.FailedDeleteThreshold(0))
	return v
}

// run runs the provisioner until ctx ends, from the moment this cluster
// has a StorageClass of api.StorageProvisioner (the chart and the
// launcher make one): until then it only watches the classes, so a
// cluster without one pays for no watch of claims and volumes. The agent
// runs it only while it leads (cmd/nestlet --leader-elect), so the
// library's own leader election is off. It runs once per Volumes.
func (v *Volumes) run(ctx context.Context, nodes corelisters.NodeLister) {
	v.volumes.nodes = nodes
	ours := make(chan struct{})
	var once sync.Once
	if _, err := v.classes.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if sc, ok := obj.(*storagev1.StorageClass); ok && sc.Provisioner == api.StorageProvisioner {
			once.Do(func() { close(ours) })
		}
	}}); err != nil {
		klog.FromContext(ctx).Error(err, "Watching StorageClasses: no volumes are provisioned")
		return
	}
	v.factory.Start(ctx.Done())
	defer v.factory.Shutdown()
	select {
	case <-ctx.Done():
		return
	case <-ours:
	}
	v.pc.Run(ctx)
}

// errNotAChild is returned for a claim whose pod went to a node that is
// not a child cluster's virtual node.
var errNotAChild = errors.New("not a child cluster's virtual node")

// Provision makes the volume of a claim whose first pod goes to the
// virtual node options.SelectedNode.
func (v *volumes) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.SelectedNodeName == "" {
		return nil, controller.ProvisioningFinished, fmt.Errorf("StorageClass %s binds Immediately: a %s volume lives in the child cluster "+
			"its first pod goes to, so its class must have volumeBindingMode WaitForFirstConsumer", o.StorageClass.Name, api.StorageProvisioner)
	}
	node, err := v.nodes.Get(o.SelectedNodeName)
	if apierrors.IsNotFound(err) {
		node, err = v.client.CoreV1().Nodes().Get(ctx, o.SelectedNodeName, metav1.GetOptions{})
	}
	if err != nil {
		return nil, controller.ProvisioningNoChange, fmt.Errorf("reading node %s: %w", o.SelectedNodeName, err)
	}
	if node.Labels[api.LabelNodeType] != api.NodeTypeVirtualKubelet || node.Labels[api.LabelCluster] == "" {
		return nil, controller.ProvisioningReschedule, fmt.Errorf("node %s is %w: StorageClass %s serves the pods sent to child clusters; "+
			"a pod that runs on this cluster's own nodes needs a class of a provisioner here", node.Name, errNotAChild, o.StorageClass.Name)
	}
	hostname := node.Labels[corev1.LabelHostname]
	if hostname == "" {
		hostname = node.Name
	}
	claim := o.PVC
	if err := v.record(ctx, node.Name, claim.UID, claim.Namespace+"/"+claim.Name); err != nil {
		return nil, controller.ProvisioningNoChange, fmt.Errorf("recording volume %s on virtual node %s: %w", o.PVName, node.Name, err)
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   o.PVName,
			Labels: map[string]string{api.LabelCluster: node.Labels[api.LabelCluster]},
			// The library sets pv.kubernetes.io/provisioned-by.
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: reclaim,
			MountOptions:                  o.StorageClass.MountOptions,
			StorageClassName:              o.StorageClass.Name,
			// A local volume needs no attach: the virtual node's kubelet
			// mounts nothing, its child does. The path only names it.
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{
				Path: path.Join("/nestlet", node.Name, claim.Namespace, claim.Name),
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname}}},
			}}}},
		},
	}
	klog.FromContext(ctx).V(2).Info("Volume pinned to a child", "claim", klog.KObj(claim), "volume", o.PVName, "node", node.Name)
	return pv, controller.ProvisioningFinished, nil
}

// Delete removes the record on the virtual node; the child then deletes
// its claim, and its class's reclaim policy decides what becomes of the
// data there.
func (v *volumes) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	node, uid := pinnedTo(pv)
	if node == "" || uid == "" {
		return &controller.IgnoredError{Reason: "not a volume pinned to a child's virtual node"}
	}
	err := v.record(ctx, node, uid, "")
	if apierrors.IsNotFound(err) {
		return nil // the child has left: its claims are its own now
	}
	return err
}

// pinnedTo returns the virtual node a volume of ours is pinned to and the
// UID of the claim it was made for.
func pinnedTo(pv *corev1.PersistentVolume) (string, types.UID) {
	if pv.Spec.Local == nil || pv.Spec.ClaimRef == nil {
		return "", ""
	}
	parts := strings.Split(strings.TrimPrefix(pv.Spec.Local.Path, "/nestlet/"), "/")
	if len(parts) != 3 || !strings.HasPrefix(pv.Spec.Local.Path, "/nestlet/") {
		return "", ""
	}
	return parts[0], pv.Spec.ClaimRef.UID
}

// record sets (value not empty) or removes the volume record of a claim on
// a virtual node, with a merge patch of that one annotation: the child's
// writes to its node touch other keys.
func (v *volumes) record(ctx context.Context, node string, claim types.UID, value string) error {
	var val any
	if value != "" {
		val = value
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{api.AnnotationClaimPrefix + string(claim): val}}})
	if err != nil {
		return err
	}
	_, err = v.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManager})
	return err
}
