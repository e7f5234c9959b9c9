package hollow

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// historySize bounds the events a store keeps for watches that resume from
// a resourceVersion (a reflector's list-then-watch gap, a re-watch). An
// older resourceVersion gets 410 Expired, and the reflector lists again, as
// against a real API server whose watch cache has moved on.
const historySize = 256

// store gives a client-go testing.Fake the API-server behaviour the agent
// relies on, in reactors placed before the fake's ObjectReaction, with the
// fake's ObjectTracker as storage:
//
//   - create: generateName, uid, creationTimestamp, generation; status
//     reset for pods (Pending) and Targets; Secret stringData folded into
//     data; the namespace must exist; pods/binding sets spec.nodeName and
//     PodScheduled.
//   - update, patch (JSON merge and strategic merge): optimistic
//     concurrency on resourceVersion; the status subresource changes only
//     status, the main resource everything but status (for every type with
//     a Status field); generation bumped on a spec change; spec.nodeName of
//     a pod cannot change.
//   - delete: uid/resourceVersion preconditions; finalizers defer deletion
//     (deletionTimestamp set, removed once the last finalizer goes); a pod
//     bound to a node is deleted gracefully (deletionTimestamp set, the
//     kubelet deletes it for good).
//   - list: field selectors (the typed fakes apply label selectors) and the
//     list's resourceVersion.
//   - watch: label and field selectors (objects entering or leaving a
//     selector come as ADDED / DELETED), resume from a resourceVersion,
//     initial events (and the initial-events-end bookmark) for watch-list,
//     and an unbounded buffer per watcher.
//
// The tracker's own watch ignores resourceVersion and selectors and panics
// once 100 events are undelivered; this store never uses it. Every write
// goes through these reactors, under the testing.Fake's lock.
type store struct {
	tracker clienttesting.ObjectTracker
	scheme  *runtime.Scheme
	clock   clock.PassiveClock
	// kinds maps each resource to its kind (the tracker needs the kind to
	// list).
	kinds map[schema.GroupVersionResource]schema.GroupVersionKind

	mu       sync.Mutex
	rv       int64
	history  []event
	watchers map[*watcher]struct{}
}

// event is a change, with the object before it (for selector transitions).
type event struct {
	rv   int64
	gvr  schema.GroupVersionResource
	ns   string
	typ  watch.EventType
	obj  runtime.Object
	prev runtime.Object
}

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

func newStore(tracker clienttesting.ObjectTracker, scheme *runtime.Scheme, clk clock.PassiveClock) *store {
	s := &store{tracker: tracker, scheme: scheme, clock: clk, kinds: map[schema.GroupVersionResource]schema.GroupVersionKind{},
		watchers: map[*watcher]struct{}{}}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || len(gvk.Kind) > 4 && gvk.Kind[len(gvk.Kind)-4:] == "List" {
			continue
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		s.kinds[gvr] = gvk
	}
	return s
}

// install puts the store's reactors in front of f's reaction chains.
func (s *store) install(f *clienttesting.Fake) {
	f.PrependReactor("create", "*", s.reactCreate)
	f.PrependReactor("update", "*", s.reactUpdate)
	f.PrependReactor("patch", "*", s.reactPatch)
	f.PrependReactor("delete", "*", s.reactDelete)
	f.PrependReactor("list", "*", s.reactList)
	f.PrependWatchReactor("*", s.reactWatch)
}

func (s *store) nextRV(m metav1.Object) {
	s.rv++
	m.SetResourceVersion(fmt.Sprint(s.rv))
}

// record appends a committed change to the history and hands it to the
// watchers. Called with s.mu held.
func (s *store) record(gvr schema.GroupVersionResource, ns string, typ watch.EventType, obj, prev runtime.Object) {
	ev := event{rv: s.rv, gvr: gvr, ns: ns, typ: typ, obj: obj, prev: prev}
	if len(s.history) == historySize {
		copy(s.history, s.history[1:])
		s.history = s.history[:historySize-1]
	}
	s.history = append(s.history, ev)
	for w := range s.watchers {
		w.push(ev)
	}
}

func (s *store) reactCreate(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.CreateActionImpl)
	if !ok {
		return false, nil, nil
	}
	gvr, ns := a.GetResource(), a.GetNamespace()
	switch sub := a.GetSubresource(); {
	case sub == "binding" && gvr == podsGVR:
		obj, err := s.bind(ns, a.GetObject())
		return true, obj, err
	case sub != "":
		return true, nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), "create "+sub)
	}
	obj, err := s.create(gvr, ns, a.GetObject())
	return true, obj, err
}

// create stores a new object, as the API server does.
func (s *store) create(gvr schema.GroupVersionResource, ns string, obj runtime.Object) (runtime.Object, error) {
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + utilrand.String(5))
	}
	if m.GetName() == "" {
		return nil, apierrors.NewInvalid(s.kinds[gvr].GroupKind(), "", field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if m.GetNamespace() == "" {
		m.SetNamespace(ns)
	}
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(metav1.NewTime(s.clock.Now()))
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	if _, ok := structField(obj, "Spec"); ok {
		m.SetGeneration(1)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		o.Status = corev1.PodStatus{Phase: corev1.PodPending}
	case *corev1.Secret:
		foldStringData(o)
	default:
		// A custom resource with a status subresource (a Target) starts
		// without status.
		if st, ok := structField(obj, "Status"); ok && gvr.Group != "" {
			st.Set(reflect.Zero(st.Type()))
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if ns != "" && gvr.Resource != "namespaces" {
		if _, err := s.tracker.Get(corev1.SchemeGroupVersion.WithResource("namespaces"), "", ns); err != nil {
			return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
		}
	}
	s.nextRV(m)
	if err := s.tracker.Create(gvr, obj, ns); err != nil {
		return nil, err
	}
	s.record(gvr, ns, watch.Added, obj.DeepCopyObject(), nil)
	return obj.DeepCopyObject(), nil
}

// bind is pods/binding: the scheduler's way to set spec.nodeName.
func (s *store) bind(ns string, obj runtime.Object) (runtime.Object, error) {
	b, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("binding: unexpected %T", obj))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.tracker.Get(podsGVR, ns, b.Name)
	if err != nil {
		return nil, err
	}
	pod := cur.(*corev1.Pod)
	switch {
	case b.UID != "" && b.UID != pod.UID:
		return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), b.Name, fmt.Errorf("the UID in the binding (%s) does not match the pod's (%s)", b.UID, pod.UID))
	case pod.Spec.NodeName != "":
		return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), b.Name, fmt.Errorf("pod %s is already assigned to node %q", b.Name, pod.Spec.NodeName))
	case pod.DeletionTimestamp != nil:
		return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), b.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", b.Name))
	}
	prev := pod.DeepCopy()
	pod.Spec.NodeName = b.Target.Name
	setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(s.clock.Now())})
	s.nextRV(pod)
	if _, err := s.commit(podsGVR, ns, pod, prev); err != nil {
		return nil, err
	}
	return b, nil
}

// commit stores next (its resourceVersion already set) in place of prev and
// records the event; it returns a copy for the caller.
func (s *store) commit(gvr schema.GroupVersionResource, ns string, next, prev runtime.Object) (runtime.Object, error) {
	if err := s.tracker.Update(gvr, next, ns); err != nil {
		return nil, err
	}
	s.record(gvr, ns, watch.Modified, next.DeepCopyObject(), prev)
	return next.DeepCopyObject(), nil
}

// remove deletes ns/name, whose last state is gone (its resourceVersion
// already set), and records the event; it returns a copy for the caller.
func (s *store) remove(gvr schema.GroupVersionResource, ns, name string, gone, prev runtime.Object) (runtime.Object, error) {
	if err := s.tracker.Delete(gvr, ns, name); err != nil {
		return nil, err
	}
	s.record(gvr, ns, watch.Deleted, gone.DeepCopyObject(), prev)
	return gone.DeepCopyObject(), nil
}

func (s *store) reactUpdate(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.UpdateActionImpl)
	if !ok {
		return false, nil, nil
	}
	sub := a.GetSubresource()
	if sub != "" && sub != "status" {
		return true, nil, apierrors.NewMethodNotSupported(a.GetResource().GroupResource(), "update "+sub)
	}
	obj, err := s.update(a.GetResource(), a.GetNamespace(), a.GetObject().DeepCopyObject(), sub, true)
	return true, obj, err
}

// update replaces an object (or, with sub "status", its status), as the API
// server does; checkRV enforces optimistic concurrency when the object
// carries a resourceVersion.
func (s *store) update(gvr schema.GroupVersionResource, ns string, obj runtime.Object, sub string, checkRV bool) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	name := m.GetName()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.tracker.Get(gvr, ns, name)
	if err != nil {
		return nil, err
	}
	cm, _ := meta.Accessor(cur)
	if rv := m.GetResourceVersion(); checkRV && rv != "" && rv != cm.GetResourceVersion() {
		return nil, apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	next := obj
	if sub == "status" {
		next = cur.DeepCopyObject()
		if !copyStructField(next, obj, "Status") {
			return nil, apierrors.NewMethodNotSupported(gvr.GroupResource(), "update status")
		}
	} else {
		copyStructField(next, cur, "Status")
		nm, _ := meta.Accessor(next)
		nm.SetUID(cm.GetUID())
		nm.SetNamespace(cm.GetNamespace())
		nm.SetCreationTimestamp(cm.GetCreationTimestamp())
		nm.SetDeletionTimestamp(cm.GetDeletionTimestamp())
		nm.SetDeletionGracePeriodSeconds(cm.GetDeletionGracePeriodSeconds())
		gen := cm.GetGeneration()
		if a, aok := structField(cur, "Spec"); aok {
			if b, bok := structField(next, "Spec"); bok && !equality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
				gen++
			}
		}
		nm.SetGeneration(gen)
		if p, ok := next.(*corev1.Pod); ok && p.Spec.NodeName != cur.(*corev1.Pod).Spec.NodeName {
			return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), name,
				field.ErrorList{field.Forbidden(field.NewPath("spec", "nodeName"), "pod updates may not change spec.nodeName (use pods/binding)")})
		}
		if sec, ok := next.(*corev1.Secret); ok {
			foldStringData(sec)
		}
	}
	nm, _ := meta.Accessor(next)
	s.nextRV(nm)
	// An object whose deletion only waited for finalizers goes with the
	// last one.
	if nm.GetDeletionTimestamp() != nil && len(nm.GetFinalizers()) == 0 && ptr.Deref(nm.GetDeletionGracePeriodSeconds(), 0) == 0 {
		return s.remove(gvr, ns, name, next, cur)
	}
	return s.commit(gvr, ns, next, cur)
}

func (s *store) reactPatch(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.PatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	gvr, ns := a.GetResource(), a.GetNamespace()
	cur, err := s.tracker.Get(gvr, ns, a.GetName())
	if err != nil {
		return true, nil, err
	}
	old, err := json.Marshal(cur)
	if err != nil {
		return true, nil, err
	}
	var patched []byte
	switch a.GetPatchType() {
	case types.MergePatchType:
		patched, err = mergePatch(old, a.GetPatch())
	case types.StrategicMergePatchType:
		patched, err = strategicpatch.StrategicMergePatch(old, a.GetPatch(), cur)
	default:
		return true, nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", gvr.GroupResource(), a.GetName(), "patch type "+string(a.GetPatchType())+" is not supported here", 0, false)
	}
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	obj, err := s.scheme.New(s.kinds[gvr])
	if err != nil {
		return true, nil, err
	}
	if err := json.Unmarshal(patched, obj); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	// A patch applies to the version it read: no conflict unless the
	// patch itself names a resourceVersion.
	out, err := s.update(gvr, ns, obj, a.GetSubresource(), true)
	return true, out, err
}

func (s *store) reactDelete(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.DeleteActionImpl)
	if !ok {
		return false, nil, nil
	}
	obj, err := s.delete(a.GetResource(), a.GetNamespace(), a.GetName(), a.DeleteOptions)
	return true, obj, err
}

// delete removes an object, or marks it deleted when finalizers or a
// running pod's grace period hold it.
func (s *store) delete(gvr schema.GroupVersionResource, ns, name string, opts metav1.DeleteOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.tracker.Get(gvr, ns, name)
	if err != nil {
		return nil, err
	}
	cm, _ := meta.Accessor(cur)
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != cm.GetUID() {
			return nil, apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, cm.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != cm.GetResourceVersion() {
			return nil, apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, cm.GetResourceVersion()))
		}
	}
	grace := int64(0)
	if pod, ok := cur.(*corev1.Pod); ok && pod.Spec.NodeName != "" && !terminal(pod) {
		grace = 30
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *pod.Spec.TerminationGracePeriodSeconds
		}
		if opts.GracePeriodSeconds != nil {
			grace = *opts.GracePeriodSeconds
		}
	}
	if grace > 0 || len(cm.GetFinalizers()) > 0 {
		if old := cm.GetDeletionGracePeriodSeconds(); cm.GetDeletionTimestamp() != nil && (old == nil || *old <= grace) {
			return cur, nil // already being deleted, no sooner
		}
		next := cur.DeepCopyObject()
		nm, _ := meta.Accessor(next)
		nm.SetDeletionTimestamp(ptr.To(metav1.NewTime(s.clock.Now().Add(time.Duration(grace) * time.Second))))
		nm.SetDeletionGracePeriodSeconds(ptr.To(grace))
		s.nextRV(nm)
		return s.commit(gvr, ns, next, cur)
	}
	gone := cur.DeepCopyObject()
	gm, _ := meta.Accessor(gone)
	s.nextRV(gm) // the deletion's resourceVersion, as watchers see it
	return s.remove(gvr, ns, name, gone, cur)
}

func (s *store) reactList(action clienttesting.Action) (bool, runtime.Object, error) {
	a, ok := action.(clienttesting.ListActionImpl)
	if !ok {
		return false, nil, nil
	}
	obj, err := s.list(a.GetResource(), a.GetKind(), a.GetNamespace(), a.ListOptions)
	return true, obj, err
}

// list returns the objects of gvr in ns that match the field selector of
// opts (the typed fake clients apply the label selector), with the store's
// current resourceVersion.
func (s *store) list(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind, ns string, opts metav1.ListOptions) (runtime.Object, error) {
	sel, err := parseSelectors(gvr, "", opts.FieldSelector)
	if err != nil {
		return nil, err
	}
	if gvk.Kind == "" {
		gvk = s.kinds[gvr]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.tracker.List(gvr, gvk, ns)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, err
	}
	kept := items[:0]
	for _, it := range items {
		if sel.matches(it) {
			kept = append(kept, it)
		}
	}
	if err := meta.SetList(obj, kept); err != nil {
		return nil, err
	}
	if lm, err := meta.ListAccessor(obj); err == nil {
		lm.SetResourceVersion(fmt.Sprint(s.rv))
	}
	return obj, nil
}

func (s *store) reactWatch(action clienttesting.Action) (bool, watch.Interface, error) {
	a, ok := action.(clienttesting.WatchActionImpl)
	if !ok {
		return false, nil, nil
	}
	w, err := s.watch(a.GetResource(), a.GetNamespace(), a.ListOptions)
	return true, w, err
}

// watch starts a watch: from opts.ResourceVersion when set (replaying the
// history after it), else with the current objects as ADDED events.
func (s *store) watch(gvr schema.GroupVersionResource, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	sel, err := parseSelectors(gvr, opts.LabelSelector, opts.FieldSelector)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := newWatcher(gvr, ns, sel)
	initial := ptr.Deref(opts.SendInitialEvents, false)
	if rv := opts.ResourceVersion; !initial && rv != "" && rv != "0" {
		var from int64
		if _, err := fmt.Sscan(rv, &from); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
		}
		if from > s.rv {
			// As the API server (storage.NewTooLargeResourceVersionError).
			err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", from, s.rv), 1)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
			return nil, err
		}
		if len(s.history) > 0 && s.history[0].rv > from+1 {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.history[0].rv-1))
		}
		for _, ev := range s.history {
			if ev.rv > from {
				w.push(ev)
			}
		}
	} else {
		list, err := s.tracker.List(gvr, s.kinds[gvr], ns)
		if err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			w.push(event{gvr: gvr, ns: ns, typ: watch.Added, obj: it})
		}
		if initial && opts.AllowWatchBookmarks {
			mark, err := s.scheme.New(s.kinds[gvr])
			if err != nil {
				return nil, err
			}
			mm, _ := meta.Accessor(mark)
			mm.SetResourceVersion(fmt.Sprint(s.rv))
			mm.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			w.send(watch.Event{Type: watch.Bookmark, Object: mark})
		}
	}
	s.watchers[w] = struct{}{}
	w.onStop = func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}
	go w.run()
	return w, nil
}

// mergePatch applies a JSON merge patch (RFC 7386) to doc.
func mergePatch(doc, patch []byte) ([]byte, error) {
	var d, p any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	return json.Marshal(mergeValue(d, p))
}

func mergeValue(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = mergeValue(dm[k], v)
	}
	return dm
}

// structField returns the exported struct field name of *obj.
func structField(obj runtime.Object, name string) (reflect.Value, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := v.Elem().FieldByName(name)
	return f, f.IsValid() && f.CanSet()
}

// copyStructField sets field name of dst to that of src (same type).
func copyStructField(dst, src runtime.Object, name string) bool {
	d, ok1 := structField(dst, name)
	s, ok2 := structField(src, name)
	if !ok1 || !ok2 || d.Type() != s.Type() {
		return false
	}
	d.Set(s)
	return true
}

func foldStringData(s *corev1.Secret) {
	if len(s.StringData) == 0 {
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// setPodCondition sets c in st, keeping the transition time when the
// status does not change.
func setPodCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}
