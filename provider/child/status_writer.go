package child

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
)

// statusWriter writes the status of Targets: only what changed, from the
// informer's copy when it holds our last write (most writes then cost no
// read).
type statusWriter struct {
	targets v1alpha1.TargetInterface
	// lister is the Target informer's store.
	lister cache.Indexer
	// written holds, by Target name, the resourceVersion our last status
	// write returned.
	written sync.Map
}

// forget drops what is known of Target name (deleted).
func (w *statusWriter) forget(name string) { w.written.Delete(name) }

// set writes conditions (and, when mutate is set, other status
// fields) to the Target, if anything changed.
func (w *statusWriter) set(ctx context.Context, name string, generation int64, mutate func(*v1alpha1.TargetStatus), conds ...metav1.Condition) {
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// The informer's copy, if it holds at least our last write (most
		// writes then cost no read); else, or on a conflict, the server's.
		var t *v1alpha1.Target
		if obj, ok, _ := w.lister.GetByKey(name); first && ok && w.caughtUp(obj.(*v1alpha1.Target)) {
			t = obj.(*v1alpha1.Target).DeepCopy()
		} else {
			var err error
			if t, err = w.targets.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		if t.Generation != generation {
			return nil // a newer run owns the status
		}
		before := t.Status.DeepCopy()
		for _, c := range conds {
			c.ObservedGeneration = generation
			meta.SetStatusCondition(&t.Status.Conditions, c)
		}
		t.Status.ObservedGeneration = generation
		if mutate != nil {
			mutate(&t.Status)
		}
		if equalStatus(before, &t.Status) {
			return nil
		}
		updated, err := w.targets.UpdateStatus(ctx, t, metav1.UpdateOptions{FieldManager: api.FieldManager})
		if err == nil {
			w.written.Store(name, updated.ResourceVersion)
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Updating target status", "target", name)
	}
}

// caughtUp reports whether the informer's copy of t is the one our last
// status write returned (or we have written none): only then can it decide
// that nothing needs writing.
func (w *statusWriter) caughtUp(t *v1alpha1.Target) bool {
	rv, ok := w.written.Load(t.Name)
	return !ok || rv.(string) == t.ResourceVersion
}

func equalStatus(a, b *v1alpha1.TargetStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.NodeName != b.NodeName || a.ParentClusterName != b.ParentClusterName ||
		!a.CertificateExpiry.Equal(b.CertificateExpiry) || !a.LastReportTime.Equal(b.LastReportTime) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
