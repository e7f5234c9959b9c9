// Package quota follows the capacity quotas a parent sets on its children
// (api.QuotasConfigMap): a child's virtual node advertises whatever its
// agent writes, and the quota, set by the parent's admin, bounds what the
// parent's scheduler places on it.
package quota

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// Parse reads a quota: comma-separated resource=quantity pairs
// ("cpu=8,memory=16Gi,pods=220").
func Parse(s string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want resource=quantity, e.g. cpu=8", part)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("%s: negative quantity %s", name, value)
		}
		out[corev1.ResourceName(name)] = q
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty quota: want resource=quantity pairs, e.g. cpu=8,memory=16Gi")
	}
	return out, nil
}

// Format writes a quota as Parse reads it, resources in order.
func Format(q corev1.ResourceList) string {
	names := make([]string, 0, len(q))
	for r := range q {
		names = append(names, string(r))
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, r := range names {
		v := q[corev1.ResourceName(r)]
		parts = append(parts, r+"="+v.String())
	}
	return strings.Join(parts, ",")
}

// Exceeds returns, in order, the resources of quota that claimed goes
// beyond, each as "cpu 16 > 8".
func Exceeds(claimed, quota corev1.ResourceList) []string {
	var out []string
	for _, r := range sortedNames(quota) {
		c, ok := claimed[r]
		if q := quota[r]; ok && c.Cmp(q) > 0 {
			out = append(out, fmt.Sprintf("%s %s > %s", r, c.String(), q.String()))
		}
	}
	return out
}

// Clamp returns alloc with each resource of quota at most its quota: a
// copy when a resource is cut, alloc itself otherwise (the scheduler asks
// for every virtual node in every cycle). Neither is to be modified.
func Clamp(alloc, quota corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList // nil until a resource is cut
	for r, q := range quota {
		if a, ok := alloc[r]; ok && a.Cmp(q) > 0 {
			if out == nil {
				out = alloc.DeepCopy()
			}
			out[r] = q.DeepCopy()
		}
	}
	if out == nil {
		return alloc
	}
	return out
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for r := range l {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// Watcher holds the quotas, kept in step by an informer on the one
// ConfigMap. A value that does not parse is not "no quota" (that would
// fail open): Of returns its error, and the scheduler places nothing more
// on that child until it is fixed.
type Watcher struct {
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	quotas  map[string]corev1.ResourceList
	invalid map[string]error
}

// New watches client's quotas.
func New(client kubernetes.Interface) *Watcher {
	w := &Watcher{quotas: map[string]corev1.ResourceList{}}
	if client == nil {
		return w
	}
	w.informer = kubeclient.ConfigMapInformer(client, metav1.NamespaceSystem, api.QuotasConfigMap, w.Set)
	return w
}

// Set makes data the quotas (tests call it directly).
func (w *Watcher) Set(data map[string]string) {
	quotas, invalid := map[string]corev1.ResourceList{}, map[string]error{}
	for name, v := range data {
		q, err := Parse(v)
		if err != nil {
			invalid[name] = fmt.Errorf("quota of %s in configmap %s/%s: %w", name, metav1.NamespaceSystem, api.QuotasConfigMap, err)
			continue
		}
		quotas[name] = q
	}
	w.mu.Lock()
	w.quotas, w.invalid = quotas, invalid
	w.mu.Unlock()
}

// Of returns the quota of child name: ok is false when none is set; err
// when the one set does not parse (treat the child as having none of
// anything).
func (w *Watcher) Of(name string) (q corev1.ResourceList, ok bool, err error) {
	if w == nil {
		return nil, false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.invalid[name]; err != nil {
		return nil, false, err
	}
	q, ok = w.quotas[name]
	return q, ok, nil
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

// Record writes q as child's quota in client's api.QuotasConfigMap
// (creating it), or, with onlyIfAbsent, only when child has none yet. It
// reports whether it wrote.
func Record(ctx context.Context, client kubernetes.Interface, child string, q corev1.ResourceList, onlyIfAbsent bool, fieldManager string) (bool, error) {
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wrote = false
		cm, err := cms.Get(ctx, api.QuotasConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.QuotasConfigMap, Namespace: metav1.NamespaceSystem},
				Data: map[string]string{child: Format(q)}}, metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), api.QuotasConfigMap, err)
			}
			wrote = err == nil
			return err
		}
		if err != nil {
			return err
		}
		if _, ok := cm.Data[child]; ok && onlyIfAbsent {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[child] = Format(q)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: fieldManager})
		wrote = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("writing the quota of %s in configmap %s/%s: %w", child, metav1.NamespaceSystem, api.QuotasConfigMap, err)
	}
	return wrote, nil
}
