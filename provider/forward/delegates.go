package forward

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
)

// The indexes a forwarder keeps on the informer of this cluster's pods: the
// delegates of each Target, and each Target's delegate of a parent pod.
// The agent's informer of every pod here (for the summary) also serves
// every Target's forwarder (Config.ChildPods), so that no pod is watched,
// decoded and kept twice.
const (
	indexTarget = "nestlet.io/delegate-target" // the Target's UID
	indexParent = "nestlet.io/delegate-parent" // <Target UID>/<parent namespace>/<parent name>
)

// DelegateIndexers are the indexes of delegates by Target and by parent
// pod, to add to an informer of this cluster's pods before it is handed
// to forwarders as Config.ChildPods (AddIndexers; once per informer).
func DelegateIndexers() cache.Indexers {
	return cache.Indexers{
		indexTarget: func(obj any) ([]string, error) {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Labels[api.LabelTargetUID] != "" {
				return []string{pod.Labels[api.LabelTargetUID]}, nil
			}
			return nil, nil
		},
		indexParent: func(obj any) ([]string, error) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return nil, nil
			}
			target, parent := pod.Labels[api.LabelTargetUID], pod.Annotations[api.AnnotationParentPod]
			if target == "" || parent == "" {
				return nil, nil
			}
			return []string{target + "/" + parent}, nil
		},
	}
}

// hasDelegateIndexers tells whether inf has every index of
// DelegateIndexers.
func hasDelegateIndexers(inf cache.SharedIndexInformer) error {
	have := inf.GetIndexer().GetIndexers()
	for name := range DelegateIndexers() {
		if _, ok := have[name]; !ok {
			return fmt.Errorf("forward: Config.ChildPods lacks the index %q: add DelegateIndexers() before handing it over", name)
		}
	}
	return nil
}

// isDelegate tells whether obj (a pod, or the tombstone of a deleted one)
// is a delegate of this Target.
func (p *Provider) isDelegate(obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	return ok && pod.Labels[api.LabelTargetUID] == string(p.cfg.TargetUID)
}

// onDelegates records h for the changes of this Target's delegates (a
// pod that gains or loses the Target's label is added or deleted). Call it
// before Run: Run subscribes every recorded handler, waits until each has
// seen every delegate already known, and unsubscribes them when its
// context ends, so that a Target run that ends leaves nothing on a shared
// Config.ChildPods.
func (p *Provider) onDelegates(h cache.ResourceEventHandler) error {
	if p.subscribed {
		return fmt.Errorf("forward: a handler of delegates added after Run")
	}
	p.handlers = append(p.handlers, cache.FilteringResourceEventHandler{FilterFunc: p.isDelegate, Handler: h})
	return nil
}

// subscribe adds the handlers of onDelegates to the informer of delegates
// until ctx ends, and returns what tells that they have synced.
func (p *Provider) subscribe(ctx context.Context) ([]cache.InformerSynced, error) {
	p.subscribed = true
	var regs []cache.ResourceEventHandlerRegistration
	unsubscribe := func() {
		for _, reg := range regs {
			if err := p.delegates.RemoveEventHandler(reg); err != nil {
				klog.FromContext(ctx).Error(err, "Unsubscribing from the delegates")
			}
		}
	}
	synced := []cache.InformerSynced{p.delegates.HasSynced}
	for _, h := range p.handlers {
		reg, err := p.delegates.AddEventHandler(h)
		if err != nil {
			unsubscribe()
			return nil, err
		}
		regs = append(regs, reg)
		synced = append(synced, reg.HasSynced)
	}
	go func() {
		<-ctx.Done()
		unsubscribe()
		close(p.unsubscribed)
	}()
	return synced, nil
}

// delegateLister lists the delegates of one Target from the indexes of
// DelegateIndexers (corelisters.PodLister).
type delegateLister struct {
	indexer cache.Indexer
	target  string
}

var _ corelisters.PodLister = delegateLister{}

func (l delegateLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	return l.list("", sel)
}

func (l delegateLister) list(namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	objs, err := l.indexer.ByIndex(indexTarget, l.target)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if (namespace == "" || pod.Namespace == namespace) && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out, nil
}

func (l delegateLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return delegateNamespaceLister{l: l, namespace: namespace}
}

type delegateNamespaceLister struct {
	l         delegateLister
	namespace string
}

func (n delegateNamespaceLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	return n.l.list(n.namespace, sel)
}

// Get returns the pod namespace/name if it is one of the Target's
// delegates, or a NotFound error.
func (n delegateNamespaceLister) Get(name string) (*corev1.Pod, error) {
	obj, ok, err := n.l.indexer.GetByKey(n.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if pod, isPod := obj.(*corev1.Pod); ok && isPod && pod.Labels[api.LabelTargetUID] == n.l.target {
		return pod, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}
