// Package child is the child's side of the agent: for every Target of
// this cluster, one run (run.go) that joins that parent or reuses the
// stored identity (joiner.go), registers the virtual node there
// (registration.go) and runs it (provider/vnode), forwards the pods bound
// to it into this cluster (forwarding.go over provider/forward), serves its
// kubelet API through the parent's proxy or directly (kubeletapi.go),
// renews the node certificate (renewal.go), and tells the truth in the
// Target's status (run_status.go, status_writer.go). Targets are watched:
// adding, changing or deleting one takes effect at run time.
package child

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/pkg/queue"
	"github.com/nestlet/nestlet/provider/forward"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/provider/peers"
)

// Values of Config.PodAPI.
const (
	PodAPIAuto   = "auto"
	PodAPILocal  = "local"
	PodAPIOrigin = "origin"
)

// Config of the child's side: what every Target's run shares.
type Config struct {
	// RESTConfig reaches this cluster's API server (a Target may not name
	// it). Required.
	RESTConfig *rest.Config
	// Client is this cluster's client, Targets its Targets'. Required.
	Client  kubernetes.Interface
	Targets v1alpha1.TargetInterface
	// Factory holds the informers of this cluster's nodes and pods; New
	// registers on them, the caller starts them. Required.
	Factory *kubeclient.CoreFactory
	// Namespace holds the node identities and bootstrap tokens.
	Namespace string
	// ClusterUID identifies this cluster (kube-system's UID). Required.
	ClusterUID string
	// GroupKeys group nodes in summaries.
	GroupKeys []string
	// LeaseDurationSeconds of the virtual nodes' leases.
	LeaseDurationSeconds int32
	// OutageTolerance and Ready: this cluster's readiness for the virtual
	// nodes' pings (readiness.go); Ready nil checks /readyz.
	OutageTolerance time.Duration
	Ready           func(context.Context) error
	// PodWorkers per Target forwarding pods; BounceTimeout, HeldMaxAge and
	// TrustedSchedulers are the forwarder's (provider/forward.Config).
	PodWorkers        int
	BounceTimeout     time.Duration
	HeldMaxAge        time.Duration
	TrustedSchedulers []string
	// PodAPI is PodAPIAuto, PodAPILocal or PodAPIOrigin; KubeletAPI and DirectAddress
	// choose how the kubelet API is served (kubeletapi.go).
	PodAPI        string
	KubeletAPI    string
	DirectAddress string
	// Peers is this cluster's gateway and its peers (nil without one).
	Peers *peers.Peers
	// ChildPodCIDRs says whether a node here is a child's and what this
	// cluster grants it (provider/parent): its summaries carry up only
	// that (vnode.Config.ChildPodCIDRs).
	ChildPodCIDRs func(n *corev1.Node) ([]string, bool)
	// NamespaceIdle is how long a namespace the agent made for the
	// parents' pods may hold none of their pods, Services or claims
	// before it is deleted (forward.NamespaceKeeper; default
	// forward.DefaultNamespaceIdle, negative never).
	NamespaceIdle time.Duration
	// Metrics of the forwarders.
	Metrics *forward.Metrics
	Clock   clock.WithTicker
}

// Controller handles "a Target was added, edited or deleted": it starts
// one run per Target generation (run.go), restarts it when the spec
// changes, and on deletion stops it, leaves the parent and removes the
// finalizer. The runs share what it holds.
type Controller struct {
	cfg          Config
	nodes        corelisters.NodeLister
	pods         corelisters.PodLister
	targetWatch  cache.SharedIndexInformer
	targetLister cache.Indexer
	queue        *queue.Worker[string]
	// status writes the Targets' status.
	status *statusWriter
	// secrets and store hold the bootstrap tokens and node identities.
	secrets *ownSecrets
	store   *join.Store
	// changes tells the virtual nodes that a node or pod changed here.
	changes *broadcaster
	// readiness answers every virtual node's ping.
	readiness *readiness
	// keeper makes the namespaces every Target's forwarder needs here,
	// and deletes them once idle.
	keeper *forward.NamespaceKeeper

	mu   sync.Mutex
	runs map[string]*targetRun // by Target name
}

// New builds the controller and registers its handlers on the informers
// of cfg.Factory: call it before they start.
func New(cfg Config) (*Controller, error) {
	c := &Controller{cfg: cfg,
		nodes:       cfg.Factory.CoreV1().Nodes().Lister(),
		pods:        cfg.Factory.CoreV1().Pods().Lister(),
		targetWatch: newTargetInformer(cfg.Targets),
		secrets:     newOwnSecrets(cfg.Client, cfg.Namespace),
		changes:     newBroadcaster(),
		readiness:   newReadiness(cfg.Client, cfg.Ready, cfg.OutageTolerance, cfg.Clock),
		keeper: forward.NewNamespaceKeeper(forward.NamespaceKeeperConfig{Client: cfg.Client,
			Namespaces: cfg.Factory.CoreV1().Namespaces().Lister(), Pods: cfg.Factory.CoreV1().Pods().Lister(),
			Idle: cfg.NamespaceIdle, Clock: cfg.Clock}),
		runs: map[string]*targetRun{},
	}
	c.targetLister = c.targetWatch.GetIndexer()
	c.status = &statusWriter{targets: cfg.Targets, lister: c.targetLister}
	c.store = &join.Store{Client: cfg.Client, Namespace: cfg.Namespace, Cached: func(name string) *corev1.Secret {
		return c.secrets.get(cfg.Namespace, name)
	}}
	// A Target that cannot leave its parent (unreachable) is retried
	// every 30 s at most, so that it leaves soon after the parent is
	// back (the default limiter waits up to 1000 s).
	c.queue = queue.New(queue.Config[string]{Name: "targets", Failure: "Syncing target", KeyName: "target",
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, leaveRetryMax),
		Reconcile:   func(ctx context.Context, name string) (time.Duration, error) { return 0, c.sync(ctx, name) }})
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := c.targetWatch.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, err
	}
	// The informer of every pod here (for the summary) also holds every
	// Target's delegates for its forwarder: one watch of the pods, not
	// one more per Target.
	podInformer := cfg.Factory.CoreV1().Pods().Informer()
	if err := podInformer.AddIndexers(forward.DelegateIndexers()); err != nil {
		return nil, err
	}
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.changes.notify() },
		UpdateFunc: func(any, any) { c.changes.notify() },
		DeleteFunc: func(any) { c.changes.notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{cfg.Factory.CoreV1().Nodes().Informer(), podInformer} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Run watches the Targets and runs them with workers until ctx ends,
// once this cluster's informers synced; the Targets' virtual nodes stay
// in the parents.
func (c *Controller) Run(ctx context.Context, workers int) error {
	go c.targetWatch.RunWithContext(ctx)
	// Not waited for: without it every Secret is read from the API server.
	go c.secrets.run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.targetWatch.HasSynced,
		c.cfg.Factory.CoreV1().Nodes().Informer().HasSynced, c.cfg.Factory.CoreV1().Pods().Informer().HasSynced) {
		return fmt.Errorf("waiting for caches to sync: %w", ctx.Err())
	}
	defer c.stopAll()
	go c.keeper.Run(ctx)
	c.queue.Run(ctx, workers)
	return nil
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

func (c *Controller) sync(ctx context.Context, name string) error {
	obj, exists, err := c.targetLister.GetByKey(name)
	if err != nil {
		return err
	}
	if !exists {
		c.stopRun(name)
		c.status.forget(name)
		return nil
	}
	t := obj.(*v1alpha1.Target)
	if t.DeletionTimestamp != nil {
		c.stopRun(name)
		if !slices.Contains(t.Finalizers, api.FinalizerCleanup) {
			return nil
		}
		if err := c.leave(ctx, t); err != nil {
			reason, msg := join.ReasonOf(err, v1alpha1.ReasonNodeError)
			c.status.set(ctx, name, t.Generation, nil, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason,
				Message: "leaving the parent: " + msg + "; it is retried (remove finalizer " + api.FinalizerCleanup + " to give up)"})
			return err
		}
		return c.removeFinalizer(ctx, name)
	}
	// Targets written by `nestctl join` or the chart come with the
	// finalizer; one written by hand gets it here.
	if !slices.Contains(t.Finalizers, api.FinalizerCleanup) {
		t = t.DeepCopy()
		t.Finalizers = append(t.Finalizers, api.FinalizerCleanup)
		updated, err := c.cfg.Targets.Update(ctx, t, metav1.UpdateOptions{FieldManager: api.FieldManager})
		if err != nil {
			return fmt.Errorf("adding finalizer: %w", err)
		}
		t = updated // start now, not when the update comes back
	}
	c.ensureRun(ctx, t)
	return nil
}

// ensureRun starts a run of t unless one runs for its generation.
func (c *Controller) ensureRun(ctx context.Context, t *v1alpha1.Target) {
	c.mu.Lock()
	old := c.runs[t.Name]
	if old != nil && old.generation == t.Generation {
		c.mu.Unlock()
		return
	}
	r := newTargetRun(c, t.DeepCopy())
	c.runs[t.Name] = r
	c.mu.Unlock()
	if old != nil {
		old.stop()
	}
	r.start(ctx)
}

func (c *Controller) stopRun(name string) {
	c.mu.Lock()
	r := c.runs[name]
	delete(c.runs, name)
	c.mu.Unlock()
	if r != nil {
		r.stop()
	}
}

// stopAll stops every run; their virtual nodes stay in the parents.
func (c *Controller) stopAll() {
	c.mu.Lock()
	runs := c.runs
	c.runs = map[string]*targetRun{}
	c.mu.Unlock()
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
func (c *Controller) leave(ctx context.Context, t *v1alpha1.Target) error {
	logger := klog.FromContext(ctx).WithValues("target", t.Name)
	id, err := c.store.Load(ctx, t.Name, t.Spec.ParentURL, t.Spec.ClusterName, c.cfg.Clock.Now())
	if err != nil {
		return err
	}
	if id != nil {
		nodeClient, err := kubernetes.NewForConfig(kubeclient.Protobuf(id.RESTConfig()))
		if err != nil {
			return err
		}
		// A parent that accepts connections and never answers must not
		// hold this worker.
		pctx, cancel := context.WithTimeout(ctx, leaveTimeout)
		err = deleteOwnNode(pctx, nodeClient, t.Spec.ClusterName, c.cfg.ClusterUID)
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
	return c.store.Delete(ctx, t.Name)
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
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManager}); err != nil {
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

func (c *Controller) removeFinalizer(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		t, err := c.cfg.Targets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		t.Finalizers = slices.DeleteFunc(t.Finalizers, func(f string) bool { return f == api.FinalizerCleanup })
		_, err = c.cfg.Targets.Update(ctx, t, metav1.UpdateOptions{FieldManager: api.FieldManager})
		return err
	})
}
