package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// The copies of ConfigMaps and Secrets are written without reading
// anything of this cluster: the agent may create, patch and delete them,
// never get or list them outside its namespace (Permissions; the chart's
// admission policy lets it write only objects labelled
// nestlet.io/target-uid). A copy is created; if one of that name exists, it
// is patched with a JSON patch whose first operation tests that it carries
// this Target's label, so an object Nestlet did not make (or another
// parent's copy) is never overwritten, and the API server answers which
// it is.

// targetOwner makes the Target the owner of what its provider makes here:
// deleting the Target has the garbage collector remove it.
func targetOwner(c *Config) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "nestlet.io/v1alpha1", Kind: "Target", Name: c.TargetName, UID: c.TargetUID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}
}

// jsonOp is one operation of a JSON patch (RFC 6902).
type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// testOurs is the operation that fails unless the object is this
// Target's copy.
func (d *dependencies) testOurs() jsonOp {
	path := "/metadata/labels/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(api.LabelTargetUID)
	return jsonOp{Op: "test", Path: path, Value: string(d.p.cfg.TargetUID)}
}

// notOurs says whether err is the refusal of a patch whose test failed:
// the object is not this Target's copy. An API server answers that with
// 422 Invalid, its generic message and no cause (the patch library's own
// words stay in its log), where an object the patch made invalid gets
// causes; the fake clientset of the unit tests says it in words.
func notOurs(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		if s.Code == http.StatusUnprocessableEntity && s.Reason == metav1.StatusReasonInvalid && (s.Details == nil || len(s.Details.Causes) == 0) {
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "testing value") || strings.Contains(msg, "test operation") || strings.Contains(msg, "error in test for path")
}

// build returns the copy of a parent ConfigMap or Secret and the patch
// that makes an existing copy equal to it; nil for what is not copied (a
// service account token: the child's own controller makes its own).
func (d *dependencies) build(parent metav1.Object) (depKey, metav1.Object, []jsonOp) {
	meta := metav1.ObjectMeta{
		Name: parent.GetName(), Namespace: d.p.ns(parent.GetNamespace()),
		Labels:          maps.Clone(parent.GetLabels()),
		Annotations:     map[string]string{api.AnnotationCopiedFrom: d.p.cfg.ParentName + "/" + string(parent.GetUID())},
		OwnerReferences: []metav1.OwnerReference{targetOwner(&d.p.cfg)},
	}
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	meta.Labels[api.LabelTargetUID] = string(d.p.cfg.TargetUID)
	ops := []jsonOp{d.testOurs(),
		{Op: "replace", Path: "/metadata/labels", Value: meta.Labels},
		{Op: "add", Path: "/metadata/annotations", Value: meta.Annotations},
		{Op: "add", Path: "/metadata/ownerReferences", Value: meta.OwnerReferences}}
	switch src := parent.(type) {
	case *corev1.ConfigMap:
		ops = append(ops, jsonOp{Op: "add", Path: "/data", Value: orEmpty(src.Data)},
			jsonOp{Op: "add", Path: "/binaryData", Value: orEmpty(src.BinaryData)})
		return depKey{kindConfigMap, parent.GetNamespace(), meta.Name}, &corev1.ConfigMap{ObjectMeta: meta, Data: src.Data, BinaryData: src.BinaryData}, ops
	case *corev1.Secret:
		if src.Type == corev1.SecretTypeServiceAccountToken {
			return depKey{}, nil, nil
		}
		ops = append(ops, jsonOp{Op: "add", Path: "/data", Value: orEmpty(src.Data)})
		return depKey{kindSecret, parent.GetNamespace(), meta.Name}, &corev1.Secret{ObjectMeta: meta, Data: src.Data, Type: src.Type}, ops
	}
	return depKey{}, nil, nil
}

func orEmpty[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// A depKey names the parent's object (its namespace is the parent's); its
// copy is in the namespace that one maps to here (namespaces.go).

// write makes the copy of a parent object here, or brings it in step:
// recorded in the ledger first, then created, or patched if it exists and
// the parent changed since this agent last wrote it. It refuses to
// overwrite an object of the same name that is not this Target's copy.
func (d *dependencies) write(ctx context.Context, parent metav1.Object) error {
	k, copied, ops := d.build(parent)
	if copied == nil {
		return nil
	}
	if err := d.ledger.add(ctx, k); err != nil {
		return err
	}
	d.begin(k)
	rv := parent.GetResourceVersion()
	err := d.create(ctx, copied)
	if err == nil {
		d.written(k, rv)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	if d.inStep(k, rv) {
		return nil
	}
	_, err = d.patch(ctx, k, ops)
	if notOurs(err) {
		if rerr := d.ledger.remove(ctx, k); rerr != nil {
			klog.FromContext(ctx).Error(rerr, "Forgetting an object that is not a copy")
		}
		return notACopy(string(k.kind), d.p.ns(k.namespace), k.name)
	}
	if err != nil {
		return err
	}
	d.written(k, rv)
	return nil
}

func notACopy(kind, ns, name string) error {
	return fmt.Errorf("%s %s/%s exists in this cluster and is not a copy made by Nestlet for this parent: rename it here or in the parent", kind, ns, name)
}

func (d *dependencies) create(ctx context.Context, obj metav1.Object) error {
	var err error
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		_, err = d.p.cfg.Child.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{FieldManager: api.FieldManager})
	case *corev1.Secret:
		_, err = d.p.cfg.Child.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{FieldManager: api.FieldManager})
	}
	return err
}

// patch applies ops to the object of k and returns its UID after.
func (d *dependencies) patch(ctx context.Context, k depKey, ops []jsonOp) (types.UID, error) {
	body, err := json.Marshal(ops)
	if err != nil {
		return "", err
	}
	opts := metav1.PatchOptions{FieldManager: api.FieldManager}
	switch k.kind {
	case kindConfigMap:
		cm, err := d.p.cfg.Child.CoreV1().ConfigMaps(d.p.ns(k.namespace)).Patch(ctx, k.name, types.JSONPatchType, body, opts)
		if err != nil {
			return "", err
		}
		return cm.UID, nil
	case kindSecret:
		s, err := d.p.cfg.Child.CoreV1().Secrets(d.p.ns(k.namespace)).Patch(ctx, k.name, types.JSONPatchType, body, opts)
		if err != nil {
			return "", err
		}
		return s.UID, nil
	}
	return "", fmt.Errorf("cannot copy %s", k.kind)
}

// begin notes that a write of the copy of k begins: it is spared from
// collection for copyGrace, and a collection under way sees it (gen).
func (d *dependencies) begin(k depKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.versions[k]
	v.at, v.gen = d.p.cfg.Clock.Now(), v.gen+1
	d.versions[k] = v
}

// written notes that the copy of k holds the parent's version rv.
func (d *dependencies) written(k depKey, rv string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.versions[k]
	v.rv = rv
	d.versions[k] = v
}

// inStep says whether this agent wrote the parent's version rv of k.
func (d *dependencies) inStep(k depKey, rv string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.versions[k]
	return ok && rv != "" && v.rv == rv
}

// copyGrace spares a copy written this recently from collection: the
// delegate it was made for may not be in the lister yet.
const copyGrace = 10 * time.Second

// fresh returns how long k stays spared from collection, and how many
// writes of it have begun.
func (d *dependencies) fresh(k depKey) (time.Duration, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.versions[k]
	if !ok {
		return 0, 0
	}
	return max(0, copyGrace-d.p.cfg.Clock.Since(v.at)), v.gen
}

// remove deletes the copy of k if it is this Target's, and forgets it. A
// patch made of the test alone changes nothing and returns the object's
// UID when it is ours; the delete is then conditional on that UID. gen is
// the count of writes of k begun when it was found unused: a write begun
// since (a delegate forwarded with it meanwhile) may have found the copy
// there just before it went, so the copy is made again and followed.
func (d *dependencies) remove(ctx context.Context, k depKey, gen uint64) error {
	uid, err := d.patch(ctx, k, []jsonOp{d.testOurs()})
	switch {
	case apierrors.IsNotFound(err), notOurs(err):
	case err != nil:
		return err
	default:
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
		switch k.kind {
		case kindConfigMap:
			err = d.p.cfg.Child.CoreV1().ConfigMaps(d.p.ns(k.namespace)).Delete(ctx, k.name, opts)
		case kindSecret:
			err = d.p.cfg.Child.CoreV1().Secrets(d.p.ns(k.namespace)).Delete(ctx, k.name, opts)
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	if err := d.ledger.remove(ctx, k); err != nil {
		return err
	}
	d.mu.Lock()
	raced := d.versions[k].gen != gen
	if !raced {
		delete(d.versions, k)
	}
	d.mu.Unlock()
	if !raced {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("A delegate was forwarded with a copy while it was collected: copying it again",
		"kind", k.kind, "object", klog.KRef(k.namespace, k.name))
	if err := d.copyOne(ctx, k); err != nil {
		return err
	}
	d.watch(k)
	return nil
}
