package forward

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/queue"
)

// remoteEndpoints gives each Service reflected here (services, with
// Config.AllServices) the endpoints the parent's Service has outside this
// cluster's subtree, in EndpointSlices of their own: managed by Nestlet
// (api.ManagedByRemoteEndpoints), so that this cluster's endpointslice
// controller leaves them alone, while kube-proxy and cluster DNS use them
// with the controller's slices of the pods here. A client anywhere below a
// Service then reaches all its ready endpoints, through the gateways'
// tunnels for those elsewhere.
//
// The parent's endpoints are every EndpointSlice of its Service: its own
// controller's (its pods, each with the node it is bound to) and the
// remote ones its own agent made from the level above. Those on this
// cluster's virtual node are this subtree's, published here by this
// cluster's own controller: left out. Each level so passes down what lies
// outside the subtree below it, and nothing goes up.
type remoteEndpoints struct {
	p      *Provider
	parent cache.SharedIndexInformer // the parent's EndpointSlices
	mine   cache.SharedIndexInformer // the remote slices of this Target here
	copies cache.SharedIndexInformer // the Services reflected here
	queue  *queue.Worker[string]
}

func newRemoteEndpoints(p *Provider, copies cache.SharedIndexInformer) (*remoteEndpoints, error) {
	r := &remoteEndpoints{p: p, copies: copies}
	r.queue = queue.New(queue.Config[string]{Name: "remote-endpoints", Failure: "Publishing remote endpoints", KeyName: "service",
		Reconcile: func(ctx context.Context, key string) (time.Duration, error) { return 0, r.sync(ctx, key) }})
	// The parent grants its nodes the reading of EndpointSlices
	// (proxy/bootstrap: nestlet:node-endpointslices-read).
	r.parent = informers.NewSharedInformerFactory(p.cfg.Parent, 0).Discovery().V1().EndpointSlices().Informer()
	r.mine = informers.NewSharedInformerFactoryWithOptions(p.cfg.Child, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = discoveryv1.LabelManagedBy + "=" + api.ManagedByRemoteEndpoints + "," + api.LabelTargetUID + "=" + string(p.cfg.TargetUID)
	})).Discovery().V1().EndpointSlices().Informer()
	// Both stores are read by Service (sync): indexed so, not listed whole.
	for _, inf := range []cache.SharedIndexInformer{r.parent, r.mine} {
		if err := inf.AddIndexers(cache.Indexers{byServiceIndex: byService}); err != nil {
			return nil, err
		}
	}
	// The queue's keys are this cluster's namespace/name of a Service;
	// a parent slice's namespace is mapped here (namespaces.go).
	for inf, here := range map[cache.SharedIndexInformer]func(string) string{r.parent: p.ns, r.mine: func(ns string) string { return ns }} {
		enqueue := func(obj any) { r.enqueueSlice(obj, here) }
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		}); err != nil {
			return nil, err
		}
	}
	_, err := copies.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.enqueueService,
		UpdateFunc: func(_, obj any) { r.enqueueService(obj) },
		DeleteFunc: r.enqueueService,
	})
	return r, err
}

func (r *remoteEndpoints) enqueueService(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		r.queue.Add(key)
	}
}

func (r *remoteEndpoints) enqueueSlice(obj any, here func(string) string) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if es, ok := obj.(*discoveryv1.EndpointSlice); ok && es.Labels[discoveryv1.LabelServiceName] != "" {
		r.queue.Add(here(es.Namespace) + "/" + es.Labels[discoveryv1.LabelServiceName])
	}
}

// run publishes remote endpoints until ctx ends, once the parent lets this
// cluster read its EndpointSlices (a parent whose plumbing predates it says
// no: then nothing is published, and the log says what to do).
func (r *remoteEndpoints) run(ctx context.Context) {
	if _, err := r.p.cfg.Parent.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{Limit: 1}); apierrors.IsForbidden(err) {
		klog.FromContext(ctx).Error(err, "The parent does not let this cluster read its EndpointSlices: Services reflected here reach only the endpoints of this subtree. Run `nestctl token create` against the parent once (it grants nestlet:node-endpointslices-read to nodes), then restart this agent")
		r.queue.ShutDown()
		return
	}
	go r.parent.RunWithContext(ctx)
	go r.mine.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), r.parent.HasSynced, r.mine.HasSynced) {
		r.queue.ShutDown()
		return
	}
	r.queue.Run(ctx, 1)
}

// sync makes the remote slices of Service key here what the parent's
// endpoints outside this subtree are.
func (r *remoteEndpoints) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	var copySvc *corev1.Service
	if obj, ok, _ := r.copies.GetStore().GetByKey(key); ok {
		if svc := obj.(*corev1.Service); svc.Labels[api.LabelTargetUID] == string(r.p.cfg.TargetUID) && svc.DeletionTimestamp == nil {
			copySvc = svc
		}
	}
	var want []*discoveryv1.EndpointSlice
	if parentNS, ok := r.p.parentNS(ns); copySvc != nil && ok {
		want = r.wanted(copySvc, slicesOf(r.parent, parentNS+"/"+name))
	}
	have := map[string]*discoveryv1.EndpointSlice{}
	for _, es := range slicesOf(r.mine, key) {
		have[es.Name] = es
	}
	client := r.p.cfg.Child.DiscoveryV1().EndpointSlices(ns)
	for _, w := range want {
		cur, ok := have[w.Name]
		delete(have, w.Name)
		switch {
		case !ok:
			if _, err := client.Create(ctx, w, metav1.CreateOptions{FieldManager: api.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating EndpointSlice %s/%s: %w", ns, w.Name, err)
			}
		case !equality.Semantic.DeepEqual(cur.Endpoints, w.Endpoints) || !equality.Semantic.DeepEqual(cur.Ports, w.Ports) || !equality.Semantic.DeepEqual(cur.Labels, w.Labels):
			next := cur.DeepCopy()
			next.Endpoints, next.Ports, next.Labels, next.OwnerReferences = w.Endpoints, w.Ports, w.Labels, w.OwnerReferences
			if _, err := client.Update(ctx, next, metav1.UpdateOptions{FieldManager: api.FieldManager}); err != nil {
				return fmt.Errorf("updating EndpointSlice %s/%s: %w", ns, w.Name, err)
			}
		}
	}
	for _, stale := range have {
		err := client.Delete(ctx, stale.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(stale.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting EndpointSlice %s/%s: %w", ns, stale.Name, err)
		}
	}
	return nil
}

// byServiceIndex indexes EndpointSlices by namespace/service-name.
const byServiceIndex = "service"

func byService(obj any) ([]string, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || es.Labels[discoveryv1.LabelServiceName] == "" {
		return nil, nil
	}
	return []string{es.Namespace + "/" + es.Labels[discoveryv1.LabelServiceName]}, nil
}

// slicesOf returns the EndpointSlices of Service key in inf, by name.
func slicesOf(inf cache.SharedIndexInformer, key string) []*discoveryv1.EndpointSlice {
	objs, _ := inf.GetIndexer().ByIndex(byServiceIndex, key)
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, obj := range objs {
		out = append(out, obj.(*discoveryv1.EndpointSlice))
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// wanted returns the remote slices of the copy svc: the parent's endpoints
// not on this cluster's virtual node, one slice per address type and set
// of ports, named after the Service and this Target.
func (r *remoteEndpoints) wanted(svc *corev1.Service, parent []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	type group struct {
		typ   discoveryv1.AddressType
		ports []discoveryv1.EndpointPort
		eps   []discoveryv1.Endpoint
	}
	groups := map[string]*group{}
	var order []string
	for _, es := range parent {
		var eps []discoveryv1.Endpoint
		for _, e := range es.Endpoints {
			if ptr.Deref(e.NodeName, "") == r.p.cfg.ClusterName {
				continue // in this subtree: published here by this cluster's controller
			}
			re := discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: e.Conditions, Hostname: e.Hostname}
			if preferClose(svc) {
				// A zone no node here is in: kube-proxy sends a client to
				// them only where its own zone has no endpoint.
				re.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: RemoteZone}}}
			}
			eps = append(eps, re)
		}
		if len(eps) == 0 {
			continue
		}
		portsKey, _ := json.Marshal(es.Ports)
		k := string(es.AddressType) + string(portsKey)
		g, ok := groups[k]
		if !ok {
			g = &group{typ: es.AddressType, ports: es.Ports}
			groups[k] = g
			order = append(order, k)
		}
		g.eps = append(g.eps, eps...)
	}
	slices.Sort(order)
	out := make([]*discoveryv1.EndpointSlice, 0, len(order))
	for i, k := range order {
		g := groups[k]
		out = append(out, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:      remoteSliceName(svc.Name, string(r.p.cfg.TargetUID), i),
				Namespace: svc.Namespace,
				Labels: map[string]string{
					discoveryv1.LabelServiceName: svc.Name,
					discoveryv1.LabelManagedBy:   api.ManagedByRemoteEndpoints,
					api.LabelTargetUID:           string(r.p.cfg.TargetUID),
				},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}},
			},
			AddressType: g.typ,
			Ports:       g.ports,
			Endpoints:   g.eps,
		})
	}
	return out
}

// remoteSliceName is the name of the i-th remote slice of a Service here.
func remoteSliceName(service, targetUID string, i int) string {
	suffix := fmt.Sprintf("-remote-%.8s-%d", targetUID, i)
	if len(service)+len(suffix) > 253 {
		service = service[:253-len(suffix)]
	}
	return service + suffix
}

// RemoteZone is the zone the remote endpoints of a Service that prefers
// close endpoints (trafficDistribution PreferClose, PreferSameZone) are
// hinted for: a zone of no node, so that a client's own zone's endpoints,
// when it has some, are used first.
const RemoteZone = "nestlet.io-remote"

// preferClose reports whether svc asks for close endpoints first.
func preferClose(svc *corev1.Service) bool {
	td := ptr.Deref(svc.Spec.TrafficDistribution, "")
	return td == corev1.ServiceTrafficDistributionPreferClose || td == corev1.ServiceTrafficDistributionPreferSameZone
}
