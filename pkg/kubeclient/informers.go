package kubeclient

import (
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// CoreFactory makes the shared informers of the core/v1 group (pods, nodes,
// ConfigMaps...), as client-go's SharedInformerFactory does, without
// linking that factory: it refers to the informers and listers of every
// API group, which the agent never uses and would carry in its binary and
// memory. One informer per type; Start runs those not yet running.
type CoreFactory struct {
	client    kubernetes.Interface
	tweak     internalinterfaces.TweakListOptionsFunc
	transform cache.TransformFunc

	mu        sync.Mutex
	informers map[reflect.Type]cache.SharedIndexInformer
	started   map[reflect.Type]bool
	wg        sync.WaitGroup
}

// NewCoreFactory returns a CoreFactory over client. tweak (optional)
// narrows every list and watch (a label or field selector); transform
// (optional) is applied to every object before it is cached.
func NewCoreFactory(client kubernetes.Interface, tweak func(*metav1.ListOptions), transform cache.TransformFunc) *CoreFactory {
	return &CoreFactory{client: client, tweak: tweak, transform: transform,
		informers: map[reflect.Type]cache.SharedIndexInformer{}, started: map[reflect.Type]bool{}}
}

// CoreV1 returns the core/v1 informers, in every namespace.
func (f *CoreFactory) CoreV1() corev1informers.Interface {
	return corev1informers.New(f, metav1.NamespaceAll, f.tweak)
}

// InformerFor returns the informer of obj's type, made with newFunc the
// first time (internalinterfaces.SharedInformerFactory).
func (f *CoreFactory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := reflect.TypeOf(obj)
	if inf, ok := f.informers[t]; ok {
		return inf
	}
	inf := newFunc(f.client, 0)
	if f.transform != nil {
		_ = inf.SetTransform(f.transform) // cannot fail before the informer runs
	}
	f.informers[t] = inf
	return inf
}

// Start runs every informer made so far that is not running yet, until
// stop is closed.
func (f *CoreFactory) Start(stop <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t, inf := range f.informers {
		if !f.started[t] {
			f.started[t] = true
			f.wg.Go(func() { inf.Run(stop) })
		}
	}
}

// Shutdown waits for the started informers to stop (after stop is closed).
func (f *CoreFactory) Shutdown() { f.wg.Wait() }
