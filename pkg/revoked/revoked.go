// Package revoked follows the children a parent cut off (`nestctl
// revoke`): the keys of the ConfigMap kube-system/nestlet-revoked
// (api.RevokedConfigMap). The parent's agent deletes their virtual nodes,
// nestlet-proxy closes and refuses their tunnels.
package revoked

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
)

// Watcher holds the revoked names, kept in step by an informer on the one
// ConfigMap.
type Watcher struct {
	informer cache.SharedIndexInformer

	mu       sync.Mutex
	names    map[string]bool
	onChange func(names map[string]bool)
}

// New watches client's revocations; onChange (optional) is called with
// the revoked names each time they change, from Run's goroutine.
func New(client kubernetes.Interface, onChange func(names map[string]bool)) *Watcher {
	w := &Watcher{names: map[string]bool{}, onChange: onChange}
	if client == nil {
		return w
	}
	w.informer = coreinformers.NewFilteredConfigMapInformer(client, metav1.NamespaceSystem, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", api.RevokedConfigMap).String()
	})
	set := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == api.RevokedConfigMap {
			w.Set(cm.Data)
		}
	}
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(any) { w.Set(nil) },
	})
	return w
}

// Set makes the keys of data the revoked names (tests call it directly).
func (w *Watcher) Set(data map[string]string) {
	names := map[string]bool{}
	for name := range data {
		names[name] = true
	}
	w.mu.Lock()
	w.names = names
	w.mu.Unlock()
	if w.onChange != nil {
		w.onChange(names)
	}
}

// Has reports whether name was revoked (never on a nil Watcher).
func (w *Watcher) Has(name string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.names[name]
}

// Run follows the ConfigMap until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	if w.informer != nil {
		w.informer.RunWithContext(ctx)
	}
}
