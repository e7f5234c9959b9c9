package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
)

// The namespaces the forwarding makes here live as long as something of
// the parents' needs them. A parent's namespace deleted there takes its
// pods, Services and claims with it, and with them their delegates,
// copies and claims here; the namespace made here for them would stay
// empty for ever (the child cannot see the parent's namespaces: its node
// identity reads none). So a namespace the agent made (label
// LabelNamespaceManagedBy) that has held no pod, Service or
// PersistentVolumeClaim for NamespaceKeeper's idle time is deleted, and
// made again when a pod or Service needs it. A namespace this cluster
// made itself is never deleted, nor one whose label its admin removed.

// Label the agent gives the namespaces it makes, and its value.
const (
	LabelNamespaceManagedBy = "app.kubernetes.io/managed-by"
	NamespaceManagedBy      = "nestlet"
)

// DefaultNamespaceIdle is how long a namespace the agent made may hold
// nothing of the parents' before it is deleted.
const DefaultNamespaceIdle = 5 * time.Minute

// errNamespaceTerminating: the namespace a delegate or copy needs is being
// deleted here (emptied, or by this cluster's admin). Transient: the write
// is retried, and the namespace made again once it is gone.
var errNamespaceTerminating = errors.New("the namespace is being deleted here; it is made again once it is gone")

// NamespaceKeeper makes the namespaces the parents' pods and Services need
// here and deletes those it made once idle. One per agent, shared by every
// Target's forwarder: two parents may share a namespace (mapping Same),
// and what one uses the other must not delete.
type NamespaceKeeper struct {
	client     kubernetes.Interface
	namespaces corelisters.NamespaceLister
	pods       corelisters.PodLister
	idle       time.Duration
	clock      clock.WithTicker
	// made are the namespaces known to exist, without a lister (a
	// namespace deleted later makes the create of what goes in it fail,
	// which is retried).
	made sync.Map

	mu sync.Mutex
	// busy is when each namespace was last needed or seen holding
	// something; a namespace first seen by this process counts as busy
	// then (an agent just restarted deletes nothing it has not watched
	// idle for the whole idle time).
	busy map[string]time.Time
}

// NamespaceKeeperConfig configures a NamespaceKeeper.
type NamespaceKeeperConfig struct {
	Client kubernetes.Interface
	// Namespaces and Pods list this cluster's namespaces and pods
	// (informers the caller starts). Without them, a namespace is made
	// once and never deleted.
	Namespaces corelisters.NamespaceLister
	Pods       corelisters.PodLister
	// Idle is how long a namespace the agent made may hold nothing before
	// it is deleted (default DefaultNamespaceIdle); negative, never.
	Idle  time.Duration
	Clock clock.WithTicker
}

// NewNamespaceKeeper returns a keeper; Run collects idle namespaces.
func NewNamespaceKeeper(cfg NamespaceKeeperConfig) *NamespaceKeeper {
	switch {
	case cfg.Namespaces == nil || cfg.Pods == nil:
		cfg.Idle = -1
	case cfg.Idle == 0:
		cfg.Idle = DefaultNamespaceIdle
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &NamespaceKeeper{client: cfg.Client, namespaces: cfg.Namespaces, pods: cfg.Pods, idle: cfg.Idle, clock: cfg.Clock,
		busy: map[string]time.Time{}}
}

// ensure makes namespace meta.Name unless it exists, and marks it needed
// now. errNamespaceTerminating while it is being deleted.
func (k *NamespaceKeeper) ensure(ctx context.Context, meta metav1.ObjectMeta) (created bool, err error) {
	k.mu.Lock()
	k.busy[meta.Name] = k.clock.Now()
	k.mu.Unlock()
	if k.namespaces == nil {
		if _, ok := k.made.Load(meta.Name); ok {
			return false, nil
		}
	} else if ns, err := k.namespaces.Get(meta.Name); err == nil {
		if ns.DeletionTimestamp != nil {
			return false, fmt.Errorf("namespace %s: %w", meta.Name, errNamespaceTerminating)
		}
		return false, nil
	}
	_, err = k.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: meta}, metav1.CreateOptions{FieldManager: api.FieldManager})
	if err == nil || apierrors.IsAlreadyExists(err) {
		// (Already there: not in the informer yet.)
		k.made.Store(meta.Name, true)
		return err == nil, nil
	}
	return false, err
}

// Run deletes idle namespaces until ctx ends, looking every quarter of
// the idle time (at most every 30 s).
func (k *NamespaceKeeper) Run(ctx context.Context) {
	if k.idle < 0 {
		return
	}
	every := min(k.idle/4, 30*time.Second)
	t := k.clock.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			k.collect(ctx)
		}
	}
}

// collect deletes the namespaces the agent made that have held nothing
// for the idle time.
func (k *NamespaceKeeper) collect(ctx context.Context) {
	logger := klog.FromContext(ctx)
	list, err := k.namespaces.List(labels.SelectorFromSet(labels.Set{LabelNamespaceManagedBy: NamespaceManagedBy}))
	if err != nil {
		return
	}
	now := k.clock.Now()
	seen := map[string]bool{}
	for _, ns := range list {
		seen[ns.Name] = true
		if ns.DeletionTimestamp != nil || api.IsSystemNamespace(ns.Name) {
			continue
		}
		if !k.idleSince(ns.Name, now, k.holdsPods(ns.Name)) {
			continue
		}
		// The informers say idle: ask the API server about what the
		// agent does not watch.
		holds, err := k.holdsServicesOrClaims(ctx, ns.Name)
		if err != nil {
			logger.V(2).Info("Checking an idle namespace", "namespace", ns.Name, "err", err)
			continue
		}
		if k.idleSince(ns.Name, now, holds) {
			k.delete(ctx, ns)
		}
	}
	k.mu.Lock()
	for name := range k.busy {
		if !seen[name] {
			delete(k.busy, name)
		}
	}
	k.mu.Unlock()
}

// idleSince marks namespace name busy now when it holds something (or was
// never seen), and tells whether it has been idle for the idle time.
func (k *NamespaceKeeper) idleSince(name string, now time.Time, holds bool) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	last, ok := k.busy[name]
	if holds || !ok {
		k.busy[name] = now
		return false
	}
	return now.Sub(last) >= k.idle
}

func (k *NamespaceKeeper) holdsPods(name string) bool {
	pods, err := k.pods.Pods(name).List(labels.Everything())
	return err != nil || len(pods) > 0
}

func (k *NamespaceKeeper) holdsServicesOrClaims(ctx context.Context, name string) (bool, error) {
	svcs, err := k.client.CoreV1().Services(name).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(svcs.Items) > 0 {
		return true, err
	}
	claims, err := k.client.CoreV1().PersistentVolumeClaims(name).List(ctx, metav1.ListOptions{Limit: 1})
	return err != nil || len(claims.Items) > 0, err
}

// delete deletes namespace ns unless it was needed since the check: the
// lock keeps this process's forwarders from making anything in it
// meanwhile, and the precondition from deleting one made again.
func (k *NamespaceKeeper) delete(ctx context.Context, ns *corev1.Namespace) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if last := k.busy[ns.Name]; k.clock.Since(last) < k.idle {
		return
	}
	err := k.client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &ns.UID, ResourceVersion: &ns.ResourceVersion}})
	switch {
	case err == nil:
		klog.FromContext(ctx).Info("Deleted a namespace the parents no longer use", "namespace", ns.Name, "idle", k.idle)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
	default:
		klog.FromContext(ctx).Info("Deleting a namespace the parents no longer use", "namespace", ns.Name, "err", err)
	}
	k.busy[ns.Name] = k.clock.Now()
}
