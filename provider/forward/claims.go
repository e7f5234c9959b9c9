package forward

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// claimsPeriod is how often the claims made here are checked against
// the volume records on the virtual node.
const claimsPeriod = 5 * time.Second

// claims carries the PersistentVolumeClaims of forwarded pods down: before
// a delegate is made, each claim its parent pod names is made here, of the
// same name, with the StorageClass the Target maps the parent's to (or
// this cluster's default), and this cluster's own provisioner binds it; a
// child cluster's is the agent's (provider/parent/volumes.go), a leaf's a
// real one. A claim made here stands for the parent's as long as the
// parent's provisioner keeps the volume's record on the virtual node;
// once it is gone (the parent's claim deleted, its volume reclaimed), the
// claim here is deleted, once no delegate uses it.
type claims struct {
	p *Provider
	// made counts the claims made (from 1: an earlier run may have made
	// some); emptyAt is its value when a list last found none. While they
	// are equal there is nothing to list, so a Target whose pods use no
	// claim lists nothing after its first pass.
	made, emptyAt atomic.Uint64
}

// claimNames returns the claims a pod's volumes name.
func claimNames(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return names
}

// ensureFor makes here every claim pod names. why is set when the pod
// cannot be forwarded (a claim of that name here that is not Nestlet's);
// err when it should be tried again.
func (c *claims) ensureFor(ctx context.Context, pod *corev1.Pod) (why string, err error) {
	names := claimNames(pod)
	if len(names) == 0 {
		return "", nil
	}
	node, err := c.p.cfg.Parent.CoreV1().Nodes().Get(ctx, c.p.cfg.ClusterName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading virtual node %s: %w", c.p.cfg.ClusterName, err)
	}
	for _, name := range names {
		parent, err := c.p.cfg.Parent.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("reading claim %s/%s in %s: %w", pod.Namespace, name, c.p.cfg.ParentName, err)
		}
		if why, err := c.ensure(ctx, parent, node); why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

func (c *claims) ensure(ctx context.Context, parent *corev1.PersistentVolumeClaim, node *corev1.Node) (string, error) {
	want := c.childClaim(parent, node)
	pvcs := c.p.cfg.Child.CoreV1().PersistentVolumeClaims(c.p.ns(parent.Namespace))
	c.made.Add(1)
	_, err := pvcs.Create(ctx, want, metav1.CreateOptions{FieldManager: api.FieldManager})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Created claim", "claim", klog.KObj(want), "class", ptr.Deref(want.Spec.StorageClassName, "(default)"))
		return "", nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating claim %s/%s in %s: %w", parent.Namespace, parent.Name, c.p.cfg.ClusterName, err)
	}
	got, err := pvcs.Get(ctx, parent.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	switch origin := got.Annotations[api.AnnotationOriginClaim]; origin {
	case want.Annotations[api.AnnotationOriginClaim]:
		return "", nil
	case "":
		return fmt.Sprintf("claim %s/%s already exists in %s and Nestlet did not make it: rename one of them, or delete the one in %s if it holds nothing to keep",
			c.p.ns(parent.Namespace), parent.Name, c.p.cfg.ClusterName, c.p.cfg.ClusterName), nil
	default:
		// A claim made for an earlier one of that name, not yet collected.
		return "", fmt.Errorf("claim %s/%s in %s still stands for %s, an earlier claim of that name; it is deleted once its volume is released",
			parent.Namespace, parent.Name, c.p.cfg.ClusterName, origin)
	}
}

// childClaim is the claim made here for parent.
func (c *claims) childClaim(parent *corev1.PersistentVolumeClaim, node *corev1.Node) *corev1.PersistentVolumeClaim {
	l := maps.Clone(parent.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l["app.kubernetes.io/managed-by"] = "nestlet"
	l[api.LabelTargetUID] = string(c.p.cfg.TargetUID)
	ann := map[string]string{api.AnnotationOriginClaim: c.p.cfg.ParentName + "/" + string(parent.UID)}
	if _, ok := node.Annotations[api.AnnotationClaimPrefix+string(parent.UID)]; ok {
		ann[api.AnnotationClaimFollowsParent] = "true"
	}
	want := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: parent.Name, Namespace: c.p.ns(parent.Namespace), Labels: l, Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: parent.Spec.AccessModes,
			Resources:   parent.Spec.Resources,
			VolumeMode:  parent.Spec.VolumeMode,
		},
	}
	if parent.Spec.StorageClassName != nil {
		if mapped, ok := c.p.cfg.StorageClasses[*parent.Spec.StorageClassName]; ok {
			want.Spec.StorageClassName = &mapped
		}
	}
	return want
}

// run deletes, every claimsPeriod, the claims made here whose parent's
// volume is gone and that no delegate uses.
func (c *claims) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.collect(ctx); err != nil {
			klog.FromContext(ctx).V(2).Info("Collecting claims", "err", err)
		}
	}, claimsPeriod)
}

func (c *claims) collect(ctx context.Context) error {
	made := c.made.Load() + 1
	if made == c.emptyAt.Load() {
		return nil
	}
	selector := labels.SelectorFromSet(labels.Set{api.LabelTargetUID: string(c.p.cfg.TargetUID)}).String()
	list, err := c.p.cfg.Child.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		c.emptyAt.Store(made) // a claim made since counts again
		return nil
	}
	node, err := c.p.cfg.Parent.CoreV1().Nodes().Get(ctx, c.p.cfg.ClusterName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	used := map[string]bool{}
	delegates, err := c.p.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, d := range delegates {
		for _, name := range claimNames(d) {
			used[d.Namespace+"/"+name] = true
		}
	}
	for i := range list.Items {
		pvc := &list.Items[i]
		if pvc.DeletionTimestamp != nil || pvc.Annotations[api.AnnotationClaimFollowsParent] != "true" || used[pvc.Namespace+"/"+pvc.Name] {
			continue
		}
		origin := pvc.Annotations[api.AnnotationOriginClaim]
		uid := origin[strings.LastIndex(origin, "/")+1:]
		if _, ok := node.Annotations[api.AnnotationClaimPrefix+uid]; ok || uid == "" {
			continue
		}
		err := c.p.cfg.Child.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(pvc.UID)}})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		klog.FromContext(ctx).Info("Deleted claim: its parent's volume is gone", "claim", klog.KObj(pvc), "origin", origin)
	}
	return nil
}
