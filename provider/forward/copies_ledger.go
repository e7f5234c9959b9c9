package forward

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/nestlet/nestlet/api"
)

// ledger records every copy of a ConfigMap or Secret that one Target's
// provider may have made in this cluster, before it makes it, in a
// ConfigMap of the agent's own namespace. The agent may not list or read
// ConfigMaps and Secrets in other namespaces (least privilege: it writes
// them, labelled, and no more), so after a restart the ledger is how it
// finds the copies to collect whose last delegate went away meanwhile.
//
// The ConfigMap is named after the Target's UID and owned by the Target:
// deleting the Target removes it with the copies. Its keys are namespaces,
// each value the sorted "Kind/name" of the copies there, one per line. The
// agent running the Target is its only writer.
type ledger struct {
	// client is nil when the ledger is kept in memory only (unit tests).
	client corev1client.ConfigMapInterface
	name   string
	meta   metav1.ObjectMeta

	mu      sync.Mutex
	loaded  bool
	exists  bool                        // the ConfigMap was read or written
	rv      string                      // its version then
	entries map[string]sets.Set[string] // namespace -> Kind/name
}

// ledgerName is the ConfigMap of the ledger of a Target's copies.
func ledgerName(target string) string { return "nestlet-copies-" + target }

func newLedger(c *Config) *ledger {
	l := &ledger{name: ledgerName(string(c.TargetUID)), entries: map[string]sets.Set[string]{}}
	if c.CopiesNamespace != "" {
		l.client = c.Child.CoreV1().ConfigMaps(c.CopiesNamespace)
	}
	l.meta = metav1.ObjectMeta{Name: l.name, Namespace: c.CopiesNamespace,
		Labels:          map[string]string{api.LabelTargetUID: string(c.TargetUID)},
		OwnerReferences: []metav1.OwnerReference{targetOwner(c)}}
	return l
}

func entryOf(k depKey) string { return string(k.kind) + "/" + k.name }

// load reads the ledger once; a missing one is empty.
func (l *ledger) load(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loadLocked(ctx)
}

func (l *ledger) loadLocked(ctx context.Context) error {
	if l.loaded || l.client == nil {
		l.loaded = true
		return nil
	}
	cm, err := l.client.Get(ctx, l.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading the ledger of copies %s/%s: %w", l.meta.Namespace, l.name, err)
	default:
		l.exists, l.rv = true, cm.ResourceVersion
		for ns, lines := range cm.Data {
			l.entries[ns] = sets.New(strings.Fields(lines)...)
		}
	}
	l.loaded = true
	return nil
}

// add records k before its copy is written; nothing is written when it is
// recorded already.
func (l *ledger) add(ctx context.Context, k depKey) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(ctx); err != nil {
		return err
	}
	if l.entries[k.namespace].Has(entryOf(k)) {
		return nil
	}
	if l.entries[k.namespace] == nil {
		l.entries[k.namespace] = sets.New[string]()
	}
	l.entries[k.namespace].Insert(entryOf(k))
	if err := l.persistLocked(ctx); err != nil {
		l.dropLocked(k)
		return err
	}
	return nil
}

// remove forgets k, once its copy is gone or found not to be this
// Target's.
func (l *ledger) remove(ctx context.Context, k depKey) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.entries[k.namespace].Has(entryOf(k)) {
		return nil
	}
	l.dropLocked(k)
	return l.persistLocked(ctx)
}

func (l *ledger) dropLocked(k depKey) {
	l.entries[k.namespace].Delete(entryOf(k))
	if l.entries[k.namespace].Len() == 0 {
		delete(l.entries, k.namespace)
	}
}

// has tells whether k's copy is recorded (made by this Target, or being
// made: one found not to be ours is forgotten).
func (l *ledger) has(k depKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entries[k.namespace].Has(entryOf(k))
}

// in returns the copies recorded in namespace.
func (l *ledger) in(namespace string) []depKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []depKey
	for _, e := range sets.List(l.entries[namespace]) {
		kind, name, _ := strings.Cut(e, "/")
		keys = append(keys, depKey{depKind(kind), namespace, name})
	}
	return keys
}

// namespaces returns the namespaces that hold recorded copies.
func (l *ledger) namespaces() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ns := make([]string, 0, len(l.entries))
	for n := range l.entries {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// persistLocked writes the ledger as it is in memory. On a conflict
// (another writer: the previous leader's last write, say) it adds what the
// newer version records and writes again: an entry too many costs a
// check when collecting, an entry lost a copy never collected.
func (l *ledger) persistLocked(ctx context.Context) error {
	if l.client == nil {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		data := make(map[string]string, len(l.entries))
		for ns, s := range l.entries {
			data[ns] = strings.Join(sets.List(s), "\n")
		}
		cm := &corev1.ConfigMap{ObjectMeta: *l.meta.DeepCopy(), Data: data}
		var out *corev1.ConfigMap
		var err error
		if !l.exists {
			out, err = l.client.Create(ctx, cm, metav1.CreateOptions{FieldManager: api.FieldManager})
		} else {
			cm.ResourceVersion = l.rv
			out, err = l.client.Update(ctx, cm, metav1.UpdateOptions{FieldManager: api.FieldManager})
		}
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
			cur, gerr := l.client.Get(ctx, l.name, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			l.exists, l.rv = true, cur.ResourceVersion
			for ns, lines := range cur.Data {
				if l.entries[ns] == nil {
					l.entries[ns] = sets.New[string]()
				}
				l.entries[ns].Insert(strings.Fields(lines)...)
			}
			return apierrors.NewConflict(corev1.Resource("configmaps"), l.name, err)
		}
		if err != nil {
			return err
		}
		l.exists, l.rv = true, out.ResourceVersion
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing the ledger of copies %s/%s: %w", l.meta.Namespace, l.name, err)
	}
	return nil
}
