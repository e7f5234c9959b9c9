package forward

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/pkg/queue"
)

// takenRetry is how often a Service whose name is taken in the child is
// tried again (the informer of copies does not see foreign Services).
const takenRetry = 30 * time.Second

// services makes Services follow the pods down. A Service of the parent
// that selects a live delegate of this Target is reflected into this
// cluster (same namespace and name, and the parent's ClusterIP where it is
// free here, else one this cluster allocates), kept in step with the parent's, and deleted when it selects
// no delegate any more or the parent's is gone. This cluster's own
// endpointslice controller then publishes the delegates as its endpoints,
// and the next level reflects the copy again for the pods it forwards.
//
// Endpoints need no reflection upwards: every level's pod carries the IP
// and readiness its delegate reports, so every level's own endpointslice
// controller publishes the pods below it, with the virtual node as
// nodeName.
type services struct {
	p      *Provider
	parent cache.SharedIndexInformer
	copies cache.SharedIndexInformer // Services made by Nestlet here (any Target)
	queue  *queue.Worker[string]

	mu    sync.Mutex
	taken map[string]bool // keys whose name is held here by a Service not made by Nestlet
}

func newServices(p *Provider) (*services, error) {
	s := &services{
		p:     p,
		taken: map[string]bool{},
	}
	s.queue = queue.New(queue.Config[string]{Name: "services", Failure: "Reflecting Service", KeyName: "service",
		Reconcile: func(ctx context.Context, key string) (time.Duration, error) { return 0, s.sync(ctx, key) }})
	// The node identity may list and watch every Service (a kubelet needs
	// them for environment variables).
	s.parent = kubeclient.NewCoreFactory(p.cfg.Parent, nil, kubeclient.StripManagedFields).CoreV1().Services().Informer()
	s.copies = kubeclient.NewCoreFactory(p.cfg.Child, func(o *metav1.ListOptions) { o.LabelSelector = api.LabelTargetUID }, kubeclient.StripManagedFields).
		CoreV1().Services().Informer()
	byKey := cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, obj any) { s.enqueue(obj) },
		DeleteFunc: s.enqueue,
	}
	if _, err := s.parent.AddEventHandler(byKey); err != nil {
		return nil, err
	}
	byCopy := cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueueCopy,
		UpdateFunc: func(_, obj any) { s.enqueueCopy(obj) },
		DeleteFunc: s.enqueueCopy,
	}
	if _, err := s.copies.AddEventHandler(byCopy); err != nil {
		return nil, err
	}
	err := p.onDelegates(cache.ResourceEventHandlerFuncs{
		AddFunc: s.delegateChanged,
		UpdateFunc: func(old, obj any) {
			if selectionChanged(old, obj) {
				s.delegateChanged(obj)
			}
		},
		DeleteFunc: s.delegateChanged,
	})
	return s, err
}

// enqueue queues a parent Service: the queue's keys are the parent's
// namespace/name.
func (s *services) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		s.queue.Add(key)
	}
}

// enqueueCopy queues the parent Service of a Service here, by the parent
// namespace its namespace maps from (namespaces.go).
func (s *services) enqueueCopy(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	if parentNS, ok := s.p.parentNS(ns); ok {
		s.queue.Add(parentNS + "/" + name)
	}
}

// delegateChanged queues every Service of the delegate's namespace, in the
// parent and here: one of them may now select it, or no longer.
func (s *services) delegateChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ns, _, ok := parentKey(pod)
	if !ok {
		return
	}
	objs, _ := s.parent.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	for _, o := range objs {
		s.enqueue(o)
	}
	objs, _ = s.copies.GetIndexer().ByIndex(cache.NamespaceIndex, pod.Namespace)
	for _, o := range objs {
		s.enqueueCopy(o)
	}
}

// selectionChanged tells whether a delegate's update may change which
// Services want it: its labels, or its end.
func selectionChanged(old, obj any) bool {
	o, ok1 := old.(*corev1.Pod)
	n, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	return !labels.Equals(o.Labels, n.Labels) || live(o) != live(n)
}

func live(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// start runs the informers and waits for them to sync.
func (s *services) start(ctx context.Context) error {
	go s.parent.RunWithContext(ctx)
	go s.copies.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), s.parent.HasSynced, s.copies.HasSynced) {
		return fmt.Errorf("waiting for Services to sync: %w", ctx.Err())
	}
	return nil
}

// run reconciles until ctx ends.
func (s *services) run(ctx context.Context) { s.queue.Run(ctx, 2) }

// sync makes this cluster's copy of the Service key what the parent's
// asks for.
func (s *services) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	var src *corev1.Service
	if obj, ok, _ := s.parent.GetStore().GetByKey(key); ok {
		src = obj.(*corev1.Service)
	}
	var cur *corev1.Service
	if obj, ok, _ := s.copies.GetStore().GetByKey(s.p.ns(ns) + "/" + name); ok && obj.(*corev1.Service).Labels[api.LabelTargetUID] != "" {
		cur = obj.(*corev1.Service)
	}
	want := s.wanted(src)
	client := s.p.cfg.Child.CoreV1().Services(s.p.ns(ns))
	if want == nil {
		s.setTaken(key, false)
		if cur == nil || !s.ours(cur) {
			return nil
		}
		err := client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cur.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting Service %s here: %w", key, err)
		}
		klog.FromContext(ctx).V(2).Info("Collected reflected Service", "service", key)
		return nil
	}
	if cur == nil {
		return s.create(ctx, src, want)
	}
	s.setTaken(key, false)
	if !s.ours(cur) {
		// Another Target of this cluster (a child with several parents)
		// reflected it first; it selects the same delegates.
		return nil
	}
	return s.update(ctx, cur, want)
}

func (s *services) ours(svc *corev1.Service) bool {
	return svc.Labels[api.LabelTargetUID] == string(s.p.cfg.TargetUID)
}

func (s *services) create(ctx context.Context, src, want *corev1.Service) error {
	client := s.p.cfg.Child.CoreV1().Services(want.Namespace)
	if s.p.cfg.AllServices {
		// No pod of the namespace may have come here yet.
		if err := s.p.ensureNamespace(ctx, want.Namespace); err != nil {
			return err
		}
	}
	_, err := client.Create(ctx, withParentsAddress(src, want), metav1.CreateOptions{FieldManager: api.FieldManager})
	if apierrors.IsInvalid(err) && !headless(want) {
		// The parent's address is taken here, or outside this cluster's
		// service range: this cluster allocates one (the name still
		// resolves here; the parent's address does not lead here).
		klog.FromContext(ctx).V(2).Info("Reflecting Service at an address of its own", "service", klog.KObj(want), "parentAddress", src.Spec.ClusterIP, "err", err)
		_, err = client.Create(ctx, want, metav1.CreateOptions{FieldManager: api.FieldManager})
	}
	switch {
	case err == nil:
		klog.FromContext(ctx).V(2).Info("Reflected Service", "service", klog.KObj(want), "path", want.Annotations[api.AnnotationPath])
		if src.Spec.Type == corev1.ServiceTypeNodePort || src.Spec.Type == corev1.ServiceTypeLoadBalancer {
			s.p.cfg.Recorder.Eventf(src, corev1.EventTypeNormal, api.ReasonReflectedAsClusterIP,
				"reflected into cluster %s as a ClusterIP Service: its %s entry point stays in this cluster", s.p.cfg.ClusterName, src.Spec.Type)
		}
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("creating Service %s/%s here: %w", want.Namespace, want.Name, err)
	}
	existing, err := client.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if existing.Labels[api.LabelTargetUID] != "" {
		s.enqueueCopy(existing) // a copy the informer has not seen yet
		return nil
	}
	key := src.Namespace + "/" + src.Name
	if s.setTaken(key, true) {
		msg := fmt.Sprintf("cluster %s already has a Service %s that Nestlet did not create; it is left as it is, and the pods forwarded there are not behind this Service in that cluster: rename one of the two", s.p.cfg.ClusterName, key)
		s.p.cfg.Recorder.Event(src, corev1.EventTypeWarning, api.ReasonServiceNameTaken, msg)
		s.p.cfg.ChildRecorder.Eventf(existing, corev1.EventTypeWarning, api.ReasonServiceNameTaken,
			"the parent %s has a Service of the same name that selects pods forwarded here; this Service is left as it is and the parent's is not reflected: rename one of the two", s.p.cfg.ParentName)
		klog.FromContext(ctx).Info("Service name taken here; not reflecting", "service", key)
	}
	s.queue.AddAfter(key, takenRetry)
	return nil
}

// withParentsAddress is want at the parent's ClusterIPs, where the parent
// has them: a pod here that calls the address it read in the parent (an
// environment variable, a user's config, the conformance suite) reaches
// the Service as in one cluster.
func withParentsAddress(src, want *corev1.Service) *corev1.Service {
	if headless(src) || src.Spec.ClusterIP == "" {
		return want
	}
	out := want.DeepCopy()
	out.Spec.ClusterIP = src.Spec.ClusterIP
	out.Spec.ClusterIPs = slices.Clone(src.Spec.ClusterIPs)
	out.Spec.IPFamilies = slices.Clone(src.Spec.IPFamilies)
	out.Spec.IPFamilyPolicy = src.Spec.IPFamilyPolicy
	return out
}

// setTaken records whether key's name is taken here, and tells whether
// that is news.
func (s *services) setTaken(key string, taken bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.taken[key]
	if taken {
		s.taken[key] = true
	} else {
		delete(s.taken, key)
	}
	return was != taken
}

func (s *services) update(ctx context.Context, cur, want *corev1.Service) error {
	client := s.p.cfg.Child.CoreV1().Services(want.Namespace)
	if headless(cur) != headless(want) || external(cur) != external(want) {
		// The ClusterIP cannot change, nor be had or lost: make the
		// copy again.
		err := client.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cur.UID))})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Service %s/%s here to change its ClusterIP: %w", cur.Namespace, cur.Name, err)
		}
		return nil // the deletion event queues it again
	}
	if sameService(cur, want) {
		return nil
	}
	next := cur.DeepCopy()
	next.Labels, next.Annotations, next.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
	next.Spec.Selector, next.Spec.Ports = want.Spec.Selector, want.Spec.Ports
	next.Spec.Type, next.Spec.ExternalName = want.Spec.Type, want.Spec.ExternalName
	next.Spec.SessionAffinity, next.Spec.SessionAffinityConfig = want.Spec.SessionAffinity, want.Spec.SessionAffinityConfig
	next.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
	next.Spec.InternalTrafficPolicy, next.Spec.TrafficDistribution = want.Spec.InternalTrafficPolicy, want.Spec.TrafficDistribution
	if _, err := client.Update(ctx, next, metav1.UpdateOptions{FieldManager: api.FieldManager}); err != nil {
		return fmt.Errorf("updating Service %s/%s here: %w", cur.Namespace, cur.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated reflected Service", "service", klog.KObj(cur))
	return nil
}

// wanted returns the copy this cluster should hold of the parent's Service
// src, or nil when it should hold none: src is gone or going, has passed
// through this cluster already, is in a namespace this cluster does not
// take, or does not concern it. With AllServices every Service concerns
// it (one without a selector gets the endpoints written in the parent as
// remote endpoints); else one that selects a live delegate of this
// Target, or an ExternalName Service of a namespace where one runs (a
// DNS name its pods resolve here as they would in the parent).
func (s *services) wanted(src *corev1.Service) *corev1.Service {
	if src == nil || src.DeletionTimestamp != nil {
		return nil
	}
	if len(src.Spec.Selector) == 0 && !external(src) && !s.p.cfg.AllServices {
		return nil
	}
	path, err := nextObjectPath(src, s.p.cfg.ParentName, s.p.cfg.ClusterName, s.p.cfg.HopLimit)
	if err != nil {
		return nil
	}
	if _, refused := s.p.cfg.Namespaces.Child(src.Namespace); refused != "" {
		// Not a namespace this cluster takes pods of (never a system
		// one, whose Services every cluster has of its own).
		return nil
	}
	// (An ExternalName Service has no selector: it selects every
	// delegate of its namespace.)
	if !s.p.cfg.AllServices && !s.selectsDelegate(src) {
		return nil
	}
	return buildService(src, &s.p.cfg, path)
}

func (s *services) selectsDelegate(src *corev1.Service) bool {
	sel := labels.SelectorFromSet(src.Spec.Selector)
	// Delegates carry their parent pod's labels, and this Target's UID.
	req, err := labels.NewRequirement(api.LabelTargetUID, selection.Equals, []string{string(s.p.cfg.TargetUID)})
	if err == nil {
		sel = sel.Add(*req)
	}
	pods, err := s.p.lister.Pods(s.p.ns(src.Namespace)).List(sel)
	if err != nil {
		return false
	}
	for _, pod := range pods {
		if live(pod) {
			return true
		}
	}
	return false
}
