// Package forward is the provider side of virtual-kubelet for Nestlet: a
// pod bound to this cluster's virtual node in a parent is created here as a
// delegate, wherever this cluster's scheduler then sends it (a real node, or
// a deeper virtual node), and the delegate's status flows back up through
// NotifyPods as informer events arrive.
package forward

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
)

// Config of a Provider. Fields without a stated default are required.
type Config struct {
	// TargetName and TargetUID identify the Target (the delegates' owner).
	TargetName string
	TargetUID  types.UID
	// ClusterName is this cluster's name in the parent; ParentName the
	// parent's, first on the path of pods created there.
	ClusterName string
	ParentName  string
	// NodeLabels, when set, returns the labels of this cluster's virtual
	// node in the parent as last seen (nil before), and CarriedBelow
	// whether some node of this cluster, or of a child's subtree, carries
	// a label key: a pod's requirement on a label set on the virtual node
	// alone is dropped from its delegate (nodelabels.go).
	NodeLabels   func() map[string]string
	CarriedBelow func(key string) bool
	// NodeTaints, when set, returns the taints of this cluster's virtual
	// node in the parent as last seen: DaemonSets' pods are forwarded only
	// where the parent relaxed the provider taint (api.TakesDaemonSets).
	NodeTaints func() []corev1.Taint
	// NodeAllocatable, when set, returns the allocatable of this
	// cluster's virtual node in the parent as last seen (nil before), and
	// ResourceBelow whether some node of this cluster has a resource: an
	// extended resource advertised on the virtual node alone is dropped
	// from the delegates' requests (noderesources.go).
	NodeAllocatable func() corev1.ResourceList
	ResourceBelow   func(r corev1.ResourceName) bool
	// HopLimit bounds forwarding (default DefaultHopLimit).
	HopLimit int
	// TrustedSchedulers are the schedulers whose pods are forwarded without
	// the toleration of the virtual nodes' taint (admit.go; default
	// DefaultTrustedSchedulers).
	TrustedSchedulers []string
	// BounceTimeout is how long a delegate may stay unschedulable here
	// before the parent pod is failed (default 30s).
	BounceTimeout time.Duration
	// HeldMaxAge is how long a held delegate is kept without its parent
	// pod asked for again or bound here (default api.HeldMaxAge;
	// reserve.go).
	HeldMaxAge time.Duration
	// Cooldown is how long the virtual node is to be avoided for the owner
	// of a bounced pod (default 2m).
	Cooldown time.Duration

	// Parent is a client of the parent with this cluster's node identity;
	// ParentPods lists the pods bound to the virtual node.
	Parent     kubernetes.Interface
	ParentPods corelisters.PodLister
	// ParentPodEvents, when set, is the informer behind ParentPods: Run
	// subscribes to its updates, so that a parent pod whose status someone
	// else changed gets its delegate's status back (reconcile.go).
	ParentPodEvents EventSource
	// Child is a client of this cluster.
	Child kubernetes.Interface
	// ChildPods, when set, is a running (or to be started) informer of
	// every pod of this cluster, with DelegateIndexers: the forwarder
	// reads this Target's delegates from it instead of watching them
	// itself. Unset, it watches them (pods with this Target's label).
	ChildPods cache.SharedIndexInformer
	// Recorder records events on parent pods and Services.
	Recorder record.EventRecorder
	// ChildRecorder records events on this cluster's objects (optional).
	ChildRecorder record.EventRecorder
	// Avoider is told when the virtual node should be avoided for the
	// owner of a bounced pod (optional).
	Avoider Avoider
	Metrics *Metrics
	// New says no delegate, copy or claim of this Target can exist yet
	// (its first run): the scans for unused copies and claims at start
	// are skipped.
	New bool
	// CopiesNamespace is the agent's namespace, where the ledger of the
	// ConfigMaps and Secrets copied here is kept (copies_ledger.go); in
	// memory only when empty.
	CopiesNamespace string
	// AllServices reflects every Service of the parent here, with the
	// endpoints the parent's has outside this cluster's subtree, not only
	// those that select pods forwarded here: set where pods reach every
	// other cluster's pods (the agent's gateway), so that a Service made
	// anywhere above answers from every cluster below with all its
	// endpoints.
	AllServices bool
	// OriginAPI, when set, gives pods the API identity of the parent
	// (pod_api_identity.go): their service account tokens are issued by the
	// parent, and they call its API server there. Unset, a pod's tokens
	// are this cluster's, as its kubelet mounts them.
	OriginAPI *OriginAPI
	// StorageClasses maps the StorageClass of a parent's claim to the one
	// its claim here takes (claims.go); unmapped, this cluster's default.
	StorageClasses map[string]string
	// WaitForRoom keeps a held delegate that fits no node here, Pending,
	// for as long as the parent asks for it (Target spec.waitForRoom;
	// reserve.go), for this cluster's autoscaler.
	WaitForRoom bool
	// Namespaces says which parent namespaces are taken here and under
	// which names (namespaces.go; Target spec.namespaces).
	Namespaces Namespaces
	// PodSecurity is the Pod Security Standard level the parent's pods
	// must meet here (podsecurity.go; Target spec.podSecurity): "" or
	// privileged for none.
	PodSecurity string
	// Limits caps what the parent's pods may request here in all
	// (limits.go; Target spec.limits): nil, no cap.
	Limits corev1.ResourceList
	// Keeper makes the namespaces here, and deletes those that hold
	// nothing of the parents' any more (namespace_keeper.go; one per
	// agent). Default: one of this forwarder's own, which keeps them.
	Keeper *NamespaceKeeper
	Clock  clock.WithDelayedExecution
}

// Avoider publishes that the virtual node should be avoided for the pods
// of an owner (a ReplicaSet, a Job...) until a time. The virtual node's
// provider (provider/vnode) is one: it tells the parent's scheduler.
type Avoider interface {
	Avoid(owner types.UID, until time.Time)
}

// EventSource is what Run needs of an informer: to subscribe to it.
type EventSource interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// Provider implements node.PodLifecycleHandler and node.PodNotifier.
type Provider struct {
	cfg Config
	// delegates is the informer the delegates are read from: the
	// forwarder's own (ownInf: run by Run) or Config.ChildPods; lister
	// lists this Target's delegates in it, and handlers are subscribed to
	// them by Run until its context ends (onDelegates, subscribe), which
	// closes unsubscribed.
	delegates    cache.SharedIndexInformer
	ownInf       bool
	lister       corelisters.PodLister
	handlers     []cache.ResourceEventHandler
	subscribed   bool
	unsubscribed chan struct{}
	deps         *dependencies
	services     *services
	remote       *remoteEndpoints // with Config.AllServices
	events       *eventReflector
	ids          *identities
	claims       *claims
	held         holds // Reserve calls waiting (reserve.go)
	// priorityClasses: the value (int32) each class here was last found
	// right for; runtimeClasses: those known to exist here (classes.go).
	priorityClasses, runtimeClasses sync.Map

	// ctx is the context of Run, for work started by informer events.
	ctx context.Context

	mu       sync.Mutex
	notify   func(*corev1.Pod)
	deleting map[types.UID]bool        // parent pods whose delegate we delete
	failed   map[types.UID]*corev1.Pod // parent pods failed here (loop, bounce, delegate lost)
	timers   map[types.UID]clock.Timer // bounce timers
	retries  map[types.UID]*retryState // delegate writes to retry (retry.go)
	// looked are the parent pods virtual-kubelet has asked about since
	// this provider started (see GetPod).
	looked map[types.UID]bool
	// replays are the sends reportOnFirstLook started and has not finished.
	replays sync.WaitGroup
}

// New checks cfg, fills defaults, and builds the informer over this Target's
// delegates. Call Run before handing the Provider to a PodController.
func New(cfg Config) (*Provider, error) {
	switch {
	case cfg.TargetName == "" || cfg.TargetUID == "" || cfg.ClusterName == "":
		return nil, fmt.Errorf("forward: TargetName, TargetUID and ClusterName are required")
	case cfg.Parent == nil || cfg.ParentPods == nil || cfg.Child == nil:
		return nil, fmt.Errorf("forward: Parent, ParentPods and Child are required")
	}
	if cfg.TrustedSchedulers == nil {
		cfg.TrustedSchedulers = DefaultTrustedSchedulers
	}
	if cfg.HopLimit == 0 {
		cfg.HopLimit = DefaultHopLimit
	}
	if cfg.BounceTimeout == 0 {
		cfg.BounceTimeout = 30 * time.Second
	}
	if cfg.HeldMaxAge == 0 {
		cfg.HeldMaxAge = api.HeldMaxAge
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = 2 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = &record.FakeRecorder{}
	}
	if cfg.ChildRecorder == nil {
		cfg.ChildRecorder = &record.FakeRecorder{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Keeper == nil {
		cfg.Keeper = NewNamespaceKeeper(NamespaceKeeperConfig{Client: cfg.Child, Idle: -1})
	}
	inf, own := cfg.ChildPods, cfg.ChildPods == nil
	if own {
		factory := kubeclient.NewCoreFactory(cfg.Child,
			func(o *metav1.ListOptions) { o.LabelSelector = api.LabelTargetUID + "=" + string(cfg.TargetUID) },
			kubeclient.StripManagedFields)
		inf = factory.CoreV1().Pods().Informer()
		if err := inf.AddIndexers(DelegateIndexers()); err != nil {
			return nil, err
		}
	} else if err := hasDelegateIndexers(inf); err != nil {
		return nil, err
	}
	p := &Provider{
		ctx:          context.Background(),
		cfg:          cfg,
		delegates:    inf,
		ownInf:       own,
		lister:       delegateLister{indexer: inf.GetIndexer(), target: string(cfg.TargetUID)},
		deleting:     map[types.UID]bool{},
		unsubscribed: make(chan struct{}),
		failed:       map[types.UID]*corev1.Pod{},
		timers:       map[types.UID]clock.Timer{},
		retries:      map[types.UID]*retryState{},
		looked:       map[types.UID]bool{},
	}
	p.deps = newDependencies(p)
	p.events = newEventReflector(p)
	p.ids = &identities{p: p, due: map[types.UID]time.Time{}}
	p.claims = &claims{p: p}
	if cfg.New {
		// No claim of this Target can exist yet: none to look for
		// until one is made.
		p.claims.emptyAt.Store(1)
	}
	err := p.onDelegates(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.delegateChanged(obj) },
		UpdateFunc: func(_, obj any) { p.delegateChanged(obj) },
		DeleteFunc: p.delegateDeleted,
	})
	if err != nil {
		return nil, err
	}
	if p.services, err = newServices(p); err != nil {
		return nil, err
	}
	if cfg.AllServices {
		if p.remote, err = newRemoteEndpoints(p, p.services.copies); err != nil {
			return nil, err
		}
	}
	if testHookChild != nil {
		testHookChild(cfg.Child)
	}
	return p, nil
}

// testHookChild, set by this package's tests, is given the client of this
// cluster of every Provider New makes: permissions_test.go checks each
// request the forwarder makes with it against Permissions.
var testHookChild func(kubernetes.Interface)

// Run starts the delegate informer and waits for it to sync; it returns
// once synced, leaving the informer running until ctx ends.
func (p *Provider) Run(ctx context.Context) error {
	p.ctx = ctx
	if p.ownInf {
		go p.delegates.RunWithContext(ctx)
	}
	synced, err := p.subscribe(ctx)
	if err != nil {
		return err
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("waiting for delegates to sync: %w", ctx.Err())
	}
	if err := p.services.start(ctx); err != nil {
		return err
	}
	if p.remote != nil {
		go p.remote.run(ctx) // not waited for: pods go on without it
	}
	if src := p.cfg.ParentPodEvents; src != nil {
		if _, err := src.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: p.parentUpdated}); err != nil {
			return err
		}
	}
	go p.deps.run(ctx)
	go p.services.run(ctx)
	go p.events.run(ctx) // not waited for: pods go on without it
	go p.claims.run(ctx)
	go p.collectHeld(ctx, 15*time.Second)
	if p.cfg.OriginAPI != nil {
		go p.ids.run(ctx)
	}
	if klog.FromContext(ctx).V(2).Enabled() {
		delegates, _ := p.lister.List(labels.Everything())
		klog.FromContext(ctx).V(2).Info("Forwarding ready", "delegates", len(delegates))
	}
	return nil
}

// NotifyPods registers the callback that carries statuses to the parent.
func (p *Provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
}

func (p *Provider) send(pod *corev1.Pod) {
	p.mu.Lock()
	cb := p.notify
	p.mu.Unlock()
	if cb != nil {
		cb(pod)
		p.cfg.Metrics.statusUpdates.WithLabelValues(p.cfg.TargetName).Inc()
	}
}

// delegateOf returns the delegate of the parent pod namespace/name of UID
// uid, or nil. Two delegates may share a parent's name for a while: a held
// delegate whose withdrawal was lost (its parent pod replaced by one of the
// same name, collected later, collectHeld) beside the new pod's, which then
// takes the name's second form (delegateName). With uid empty, it is the
// delegate of the parent pod bound here now, else any.
func (p *Provider) delegateOf(namespace, name string, uid types.UID) *corev1.Pod {
	objs, err := p.delegates.GetIndexer().ByIndex(indexParent, string(p.cfg.TargetUID)+"/"+namespace+"/"+name)
	if err != nil || len(objs) == 0 {
		return nil
	}
	if uid == "" {
		if len(objs) == 1 {
			return objs[0].(*corev1.Pod)
		}
		if parent, err := p.cfg.ParentPods.Pods(namespace).Get(name); err == nil {
			uid = parent.UID
		}
	}
	for _, o := range objs {
		if d := o.(*corev1.Pod); originUID(d) == uid {
			return d
		}
	}
	if uid == "" {
		return objs[0].(*corev1.Pod)
	}
	return nil
}

// Delegate returns the delegate of the parent pod namespace/name (for the
// kubelet API), or a NotFound error. The pod is the informer's: read only.
func (p *Provider) Delegate(namespace, name string) (*corev1.Pod, error) {
	d := p.delegateOf(namespace, name, "")
	if d == nil {
		return nil, errdefs.NotFoundf("pod %s/%s has no delegate in %s", namespace, name, p.cfg.ClusterName)
	}
	return d, nil
}

// GetPod returns the parent pod as this cluster runs it: its delegate's
// status, or the failure recorded here.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	parent, err := p.cfg.ParentPods.Pods(namespace).Get(name)
	if err != nil {
		parent = nil
	}
	if parent != nil {
		p.mu.Lock()
		f := p.failed[parent.UID]
		p.mu.Unlock()
		if f != nil {
			return f.DeepCopy(), nil
		}
	}
	var uid types.UID
	if parent != nil {
		uid = parent.UID
	}
	d := p.delegateOf(namespace, name, uid)
	if d == nil || isHeld(d) {
		// A held delegate is not yet the pod's: virtual-kubelet then
		// calls CreatePod, which releases it.
		return nil, errdefs.NotFoundf("pod %s/%s has no delegate in %s", namespace, name, p.cfg.ClusterName)
	}
	if parent == nil {
		return asParent(nil, d), nil
	}
	up := asParent(parent, d)
	p.reportOnFirstLook(parent, up)
	if delegateBehind(parent, d) {
		// virtual-kubelet calls UpdatePod when the pod it is given
		// differs from the one GetPod returns: the parent pod as the
		// delegate has it, then, in what an update carries.
		up.Labels, up.Annotations = maps.Clone(d.Labels), maps.Clone(d.Annotations)
	}
	return up, nil
}

// reportOnFirstLook sends up the status of a parent pod the first time
// virtual-kubelet asks about it (when its pod controller syncs the pod,
// at its start and on every change). The delegate informer syncs before
// virtual-kubelet registers its callback and knows its pods (Run), so
// what it saw then went nowhere: after a restart, a delegate that went
// Running while the agent was down would otherwise be reported only when
// it changed again. The callback may wait for virtual-kubelet's cache, so
// it is not called here.
func (p *Provider) reportOnFirstLook(parent, up *corev1.Pod) {
	p.mu.Lock()
	first := !p.looked[parent.UID]
	p.looked[parent.UID] = true
	p.mu.Unlock()
	if first && !sameStatus(parent.Status, up.Status) {
		p.replays.Go(func() { p.send(up.DeepCopy()) })
	}
}

// GetPodStatus returns the status of GetPod.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every parent pod this cluster runs a delegate for, so
// that virtual-kubelet removes delegates whose parent pod is gone.
func (p *Provider) GetPods(_ context.Context) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	delegates, _ := p.lister.List(labels.Everything())
	for _, d := range delegates {
		ns, name, ok := parentKey(d)
		if !ok || isHeld(d) {
			continue // a reservation: collectHeld's
		}
		parent, err := p.cfg.ParentPods.Pods(ns).Get(name)
		if err != nil {
			parent = nil
		}
		out = append(out, asParent(parent, d))
	}
	return out, nil
}
