package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

const fieldManager = "nestlet"

// targetController handles "a Target was added, edited or deleted": it
// starts one run per Target generation (target_run.go), restarts it when
// the spec changes, and on deletion stops it, leaves the parent and
// removes the finalizer.
type targetController struct {
	targets v1alpha1.TargetInterface
	lister  cache.Indexer
	queue   workqueue.TypedRateLimitingInterface[string]
	// status writes the Targets' status (a failure to leave).
	status *statusWriter
	// store holds the node identities, forgotten on leaving.
	store      *join.Store
	clusterUID string
	clock      clock.PassiveClock
	// newRun returns a run of t, not started.
	newRun func(t *v1alpha1.Target) *targetRun

	mu   sync.Mutex
	runs map[string]*targetRun // by Target name
}

// newTargetInformer watches the Targets of this cluster.
func newTargetInformer(targets v1alpha1.TargetInterface) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return targets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return targets.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(lw, &v1alpha1.Target{}, 0, cache.Indexers{})
}

// newTargetController queues the Targets that informer sees change.
func newTargetController(targets v1alpha1.TargetInterface, informer cache.SharedIndexInformer, status *statusWriter, store *join.Store,
	clusterUID string, clk clock.PassiveClock, newRun func(*v1alpha1.Target) *targetRun) (*targetController, error) {
	tc := &targetController{
		targets:    targets,
		lister:     informer.GetIndexer(),
		status:     status,
		store:      store,
		clusterUID: clusterUID,
		clock:      clk,
		newRun:     newRun,
		runs:       map[string]*targetRun{},
		// A Target that cannot leave its parent (unreachable) is retried
		// every 30 s at most, so that it leaves soon after the parent is
		// back (the default limiter waits up to 1000 s).
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, leaveRetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "targets"}),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			tc.queue.Add(key)
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	return tc, err
}

func (tc *targetController) run(ctx context.Context, workers int) {
	defer tc.stopAll()
	defer tc.queue.ShutDown()
	for range workers {
		go func() {
			for tc.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
}

func (tc *targetController) processNext(ctx context.Context) bool {
	key, shutdown := tc.queue.Get()
	if shutdown {
		return false
	}
	defer tc.queue.Done(key)
	if err := tc.sync(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Syncing target", "target", key)
		tc.queue.AddRateLimited(key)
		return true
	}
	tc.queue.Forget(key)
	return true
}

func (tc *targetController) sync(ctx context.Context, name string) error {
	obj, exists, err := tc.lister.GetByKey(name)
	if err != nil {
		return err
	}
	if !exists {
		tc.stopRun(name)
		tc.status.forget(name)
		return nil
	}
	t := obj.(*v1alpha1.Target)
	if t.DeletionTimestamp != nil {
		tc.stopRun(name)
		if !slices.Contains(t.Finalizers, api.FinalizerCleanup) {
			return nil
		}
		if err := tc.leave(ctx, t); err != nil {
			reason, msg := join.ReasonOf(err, v1alpha1.ReasonNodeError)
			tc.status.set(ctx, name, t.Generation, nil, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason,
				Message: "leaving the parent: " + msg + "; it is retried (remove finalizer " + api.FinalizerCleanup + " to give up)"})
			return err
		}
		return tc.removeFinalizer(ctx, name)
	}
	// Targets written by `nestctl join` or the chart come with the
	// finalizer; one written by hand gets it here.
	if !slices.Contains(t.Finalizers, api.FinalizerCleanup) {
		t = t.DeepCopy()
		t.Finalizers = append(t.Finalizers, api.FinalizerCleanup)
		updated, err := tc.targets.Update(ctx, t, metav1.UpdateOptions{FieldManager: fieldManager})
		if err != nil {
			return fmt.Errorf("adding finalizer: %w", err)
		}
		t = updated // start now, not when the update comes back
	}
	tc.ensureRun(ctx, t)
	return nil
}

// ensureRun starts a run of t unless one runs for its generation.
func (tc *targetController) ensureRun(ctx context.Context, t *v1alpha1.Target) {
	tc.mu.Lock()
	old := tc.runs[t.Name]
	if old != nil && old.generation == t.Generation {
		tc.mu.Unlock()
		return
	}
	r := tc.newRun(t.DeepCopy())
	tc.runs[t.Name] = r
	tc.mu.Unlock()
	if old != nil {
		old.stop()
	}
	r.start(ctx)
}

func (tc *targetController) stopRun(name string) {
	tc.mu.Lock()
	r := tc.runs[name]
	delete(tc.runs, name)
	tc.mu.Unlock()
	if r != nil {
		r.stop()
	}
}

// stopAll stops every run; their virtual nodes stay in the parents.
func (tc *targetController) stopAll() {
	tc.mu.Lock()
	runs := tc.runs
	tc.runs = map[string]*targetRun{}
	tc.mu.Unlock()
	for _, r := range runs {
		r.stop()
	}
}

const (
	// leaveTimeout bounds the requests to the parent when leaving it.
	leaveTimeout = 15 * time.Second
	// leaveRetryMax is the longest wait between two tries of a Target.
	leaveRetryMax = 30 * time.Second
)

// leave removes the virtual node from the parent and forgets the identity.
func (tc *targetController) leave(ctx context.Context, t *v1alpha1.Target) error {
	logger := klog.FromContext(ctx).WithValues("target", t.Name)
	id, err := tc.store.Load(ctx, t.Name, t.Spec.ParentURL, t.Spec.ClusterName, tc.clock.Now())
	if err != nil {
		return err
	}
	if id != nil {
		nodeClient, err := kubernetes.NewForConfig(id.RESTConfig())
		if err != nil {
			return err
		}
		// A parent that accepts connections and never answers must not
		// hold this worker.
		pctx, cancel := context.WithTimeout(ctx, leaveTimeout)
		err = deleteOwnNode(pctx, nodeClient, t.Spec.ClusterName, tc.clusterUID)
		cancel()
		switch {
		case err == nil, apierrors.IsNotFound(err):
			logger.Info("Removed virtual node from parent", "node", t.Spec.ClusterName)
		case apierrors.IsForbidden(err), errors.Is(err, errNodeNotRemoved):
			logger.Error(err, "The virtual node was not removed from the parent; delete it there by hand", "node", t.Spec.ClusterName)
		default:
			return join.Classify(err, t.Spec.ParentURL)
		}
	}
	return tc.store.Delete(ctx, t.Name)
}

// deleteOwnNode has the parent's agent delete node name, only if it is
// this cluster's (a Target that failed with NameTaken must not remove
// another cluster's node): a node may not delete itself, so it marks
// itself leaving (api.AnnotationLeaving) and waits until the node is gone.
func deleteOwnNode(ctx context.Context, client kubernetes.Interface, name, clusterUID string) error {
	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if n.Annotations[api.AnnotationClusterUID] != clusterUID {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationLeaving: clusterUID}}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, leavePoll, true, func(ctx context.Context) (bool, error) {
		cur, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != n.UID) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w: marked leaving (%s), but the parent's agent did not delete it: %w", errNodeNotRemoved, api.AnnotationLeaving, err)
	}
	return nil
}

// errNodeNotRemoved: the parent's agent did not delete a leaving child's
// node in time (not running, or of a version before AnnotationLeaving).
var errNodeNotRemoved = errors.New("virtual node not removed")

// leavePoll is how often a leaving child looks whether its virtual node
// is gone.
const leavePoll = 200 * time.Millisecond

func (tc *targetController) removeFinalizer(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		t, err := tc.targets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		t.Finalizers = slices.DeleteFunc(t.Finalizers, func(f string) bool { return f == api.FinalizerCleanup })
		_, err = tc.targets.Update(ctx, t, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
}
