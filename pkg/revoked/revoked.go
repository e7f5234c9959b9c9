// Package revoked follows the children a parent cut off (`nestctl
// revoke`): the keys of the ConfigMap kube-system/nestlet-revoked
// (api.RevokedConfigMap). The parent's agent deletes their virtual nodes,
// nestlet-proxy closes and refuses their tunnels.
package revoked

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// Watcher holds the revoked names, kept in step by an informer on the one
// ConfigMap.
type Watcher struct {
	informer cache.SharedIndexInformer

	mu       sync.Mutex
	entries  map[string]string // name -> when and why
	onChange func(names map[string]bool)
}

// New watches client's revocations; onChange (optional) is called with
// the revoked names each time they change, from Run's goroutine.
func New(client kubernetes.Interface, onChange func(names map[string]bool)) *Watcher {
	w := &Watcher{entries: map[string]string{}, onChange: onChange}
	if client == nil {
		return w
	}
	w.informer = kubeclient.ConfigMapInformer(client, metav1.NamespaceSystem, api.RevokedConfigMap, w.Set)
	return w
}

// Set makes data the revocations: each key a revoked name, its value when
// and why (tests call it directly).
func (w *Watcher) Set(data map[string]string) {
	names := map[string]bool{}
	entries := map[string]string{}
	for name, when := range data {
		names[name], entries[name] = true, when
	}
	w.mu.Lock()
	w.entries = entries
	w.mu.Unlock()
	if w.onChange != nil {
		w.onChange(names)
	}
}

// Has reports whether name was revoked (never on a nil Watcher).
func (w *Watcher) Has(name string) bool {
	_, revoked, _ := w.Lookup(context.Background(), name)
	return revoked
}

// Lookup returns when and why name was revoked, if it was (the shape of
// join.Revocations).
func (w *Watcher) Lookup(_ context.Context, name string) (string, bool, error) {
	if w == nil {
		return "", false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	when, ok := w.entries[name]
	return when, ok, nil
}

// HasSynced reports whether the ConfigMap was read (always, without a
// client).
func (w *Watcher) HasSynced() bool { return w.informer == nil || w.informer.HasSynced() }

// Run follows the ConfigMap until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	if w.informer != nil {
		w.informer.RunWithContext(ctx)
	}
}
