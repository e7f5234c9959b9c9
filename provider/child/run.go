package child

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/virtual-kubelet/virtual-kubelet/node"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/pkg/kubeletapi"
	"github.com/nestlet/nestlet/provider/forward"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/provider/peers"
	"github.com/nestlet/nestlet/provider/vnode"
)

// Reasons after which retrying the same spec is pointless: the run waits
// for the Target to change.
var terminalReasons = map[string]bool{
	v1alpha1.ReasonInvalidSpec: true,
	v1alpha1.ReasonSelfTarget:  true,
	v1alpha1.ReasonCSRDenied:   true,
}

// errReconnected ends a run when the parent is reachable again after an
// outage, to start afresh at once: client-go's informers back off up to
// 30 s between attempts, which would delay what the parent decided
// meanwhile (pods deleted, evicted) by as much.
var errReconnected = errors.New("the parent is reachable again")

// errProxyChanged ends a run when the parent's nestlet-proxy appeared,
// went, or changed its endpoints, to serve the kubelet API the new way.
var errProxyChanged = errors.New("the parent's nestlet-proxy changed")

// targetRun is one generation of one Target: it joins the parent or reuses
// the stored identity (joiner.go), runs the virtual node there
// until something ends it (registrar, forwarding, kubeletAPI, renewal),
// backs off and starts again. Its status goes through runStatus.
type targetRun struct {
	c          *Controller
	target     *v1alpha1.Target
	generation int64
	cancel     context.CancelFunc
	done       chan struct{}
	status     *runStatus
	joiner     *joiner
	// started is set once a run of this generation forwarded pods.
	started bool
	// reconnected receives a value when the parent is reachable again
	// after an outage.
	reconnected chan struct{}
}

func newTargetRun(c *Controller, t *v1alpha1.Target) *targetRun {
	status := newRunStatus(c.status, t, c.cfg.Clock)
	return &targetRun{c: c, target: t, generation: t.Generation, done: make(chan struct{}), reconnected: make(chan struct{}, 1),
		status: status,
		joiner: &joiner{target: t, client: c.cfg.Client, secrets: c.secrets, store: c.store, own: c.cfg.RESTConfig, status: status, clock: c.cfg.Clock}}
}

func (r *targetRun) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("target", r.target.Name, "parent", r.target.Spec.ParentURL))
	go r.run(ctx)
}

// stop cancels the run and waits for it; its virtual node is left in the
// parent (a new run takes it over, or leave removes it).
func (r *targetRun) stop() {
	r.cancel()
	<-r.done
}

func (r *targetRun) run(ctx context.Context) {
	defer close(r.done)
	logger := klog.FromContext(ctx)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 2 * time.Minute}
	for {
		err := r.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errProxyChanged) || errors.Is(err, errReconnected) {
			switch {
			case errors.Is(err, errProxyChanged):
				logger.Info("The parent's nestlet-proxy changed; restarting the virtual node's kubelet API")
			case errors.Is(err, errReconnected):
				logger.Info("The parent is reachable again; starting afresh")
			}
			continue
		}
		reason, msg := join.ReasonOf(err, v1alpha1.ReasonNodeError)
		logger.Info("Target not ready", "reason", reason, "message", msg)
		r.status.setReady(ctx, metav1.ConditionFalse, reason, msg)
		if terminalReasons[reason] {
			<-ctx.Done()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-r.c.cfg.Clock.After(backoff.Step()):
		}
	}
}

// once joins (or reuses the stored identity), chooses the kubelet API,
// then runs the virtual node (runNode).
func (r *targetRun) once(ctx context.Context) error {
	if err := validateSpec(r.target); err != nil {
		return err
	}
	id, discovered, err := r.joiner.identity(ctx)
	if err != nil {
		return err
	}
	r.status.setIdentity(id)
	cert, err := join.NewClientCert(id)
	if err != nil {
		return err
	}
	cfg, err := id.RotatingRESTConfig(cert)
	if err != nil {
		return err
	}
	nodeClient, err := kubernetes.NewForConfig(kubeclient.Protobuf(cfg))
	if err != nil {
		return err
	}
	reg := newRegistrar(nodeClient, r.target, r.c.cfg.ClusterUID, r.c.cfg.LeaseDurationSeconds, r.c.cfg.Clock)
	// Right after a join the node is looked up only if creating it finds
	// one (register).
	var existing *corev1.Node
	if discovered == nil {
		if existing, err = reg.ownNode(ctx); err != nil {
			return err
		}
	}
	kapi, err := chooseKubeletAPI(ctx, nodeClient, id, cert, r.c.cfg.KubeletAPI, r.c.cfg.DirectAddress, discovered)
	if err != nil {
		return err
	}
	select { // an outage reported by an earlier run is over
	case <-r.reconnected:
	default:
	}
	return r.runNode(ctx, id, cert, nodeClient, reg, existing, kapi)
}

// runNode builds the virtual node's provider and the forwarder, serves the
// kubelet API with the forwarder's delegates, registers the node, starts
// the node and pod controllers, and holds the run until something ends it.
func (r *targetRun) runNode(ctx context.Context, id *join.Identity, cert *join.ClientCert, nodeClient kubernetes.Interface, reg *registrar, existing *corev1.Node, kapi *kubeletAPI) error {
	t := r.target
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	kapi.askEarly(runCtx)
	changed, unsubscribe := r.c.changes.subscribe()
	defer unsubscribe()
	prov, err := newVirtualNode(t, nodeClient, r.vnodeConfig(ctx, parentName(id, t), kapi, changed))
	if err != nil {
		kapi.close()
		return err
	}
	// Each version of the node: what the parent says of this cluster
	// (parentview.go), and the parent's gateway.
	view := newParentView(r.status.set, prov.PodCIDRs)
	fc := r.forwardConfig(parentName(id, t), prov)
	fc.NodeLabels, fc.CarriedBelow, fc.NodeTaints = view.nodeLabels, carriedBelow(r.c.nodes), view.nodeTaints
	fc.NodeAllocatable, fc.ResourceBelow = view.nodeAllocatable, resourceBelow(r.c.nodes)
	fc.StorageClasses = t.Spec.StorageClasses
	fc.WaitForRoom = t.Spec.WaitForRoom
	fc.Namespaces = namespacePolicy(t, parentName(id, t), r.c.cfg.Namespace)
	fc.PodSecurity = t.Spec.PodSecurity
	fc.Limits = t.Spec.Limits
	relay := peers.NewParentRelay(r.c.cfg.Clock)
	fc.OriginAPI = r.originAPI(id, relay, existing)
	pods, err := newForwarding(runCtx, nodeClient, fc)
	r.started = true
	if err != nil {
		kapi.close()
		return err
	}
	if err := kapi.serve(runCtx, kubeletapi.Config{
		NodeName:    t.Spec.ClusterName,
		Delegates:   pods.fwd,
		Reserver:    pods.fwd,
		Child:       r.c.cfg.Client,
		ChildConfig: r.c.cfg.RESTConfig,
		Nodes:       func() ([]*corev1.Node, error) { return r.c.nodes.List(labels.Everything()) },
	}); err != nil {
		return err
	}
	initial, err := r.register(ctx, reg, prov, existing, kapi)
	if err != nil {
		return err
	}
	relay.Set(initial)
	nc, err := reg.nodeController(prov, initial)
	if err != nil {
		return err
	}
	defer func() {
		cancel()
		<-nc.Done()
	}()
	go func() { _ = nc.Run(runCtx) }()
	pc, err := r.startControllers(ctx, runCtx, nc, nodeClient, pods)
	if err != nil {
		return err
	}
	if own, err := prov.PodCIDRs(); err == nil {
		r.status.setPodCIDRs(own)
	}
	go checkPodCIDRs(runCtx, r.c.cfg.Clock, view, max(3*reportFrequency(t), 15*time.Second))
	onNode := func(n *corev1.Node) {
		reg.shortcuts.observe(n)
		view.observe(runCtx, n)
	}
	if tun := r.c.cfg.Peers; tun != nil {
		compat := onNode
		onNode = func(n *corev1.Node) {
			tun.WatchParent(runCtx, t.Name, n, prov.PodCIDRs)
			relay.Set(n)
			compat(n)
		}
		defer tun.SetParent(ctx, t.Name, nil, nil)
		defer tun.OnKeyChange(t.Name, prov.PostStatus)()
		go tun.ReportParent(runCtx, r.c.cfg.Clock, t.Name, r.status.set, peers.PublishOnNode(nodeClient, t.Spec.ClusterName))
	}
	watchOwnNode(runCtx, nodeClient, t.Spec.ClusterName, r.c.cfg.Clock, prov.PostStatus, onNode)
	// Ready once the parent's agent has decorated the node (its verdicts
	// then go with it, one write), or after decorationWait without.
	select {
	case <-view.decorated:
	case <-r.c.cfg.Clock.After(decorationWait):
	case <-ctx.Done():
		return ctx.Err()
	}
	view.withReady(func(conds ...metav1.Condition) {
		r.status.setReady(ctx, metav1.ConditionTrue, v1alpha1.ReasonReporting,
			fmt.Sprintf("virtual node %s is registered in the parent and reports every %s; %s", t.Spec.ClusterName, reportFrequency(t), kapi.describe()), conds...)
	})

	renewal := newRenewal(r.joiner, r.status, r.c.cfg.Clock, id, cert)
	if tun := r.c.cfg.Peers; tun != nil {
		renewal.renewed = tun.Rotate
	}
	return r.hold(ctx, renewal, nc, pc, kapi.watchProxy(runCtx, r.c.cfg.Clock, nodeClient))
}

// register registers the virtual node in the parent, in tunnel mode with
// its own kubelet port once the proxy gave it (waiting up to
// nodePortWait), and has each later change of its endpoint reported.
func (r *targetRun) register(ctx context.Context, reg *registrar, prov *vnode.Provider, existing *corev1.Node, kapi *kubeletAPI) (*corev1.Node, error) {
	if answered := kapi.nodePortAnswered(); answered != nil {
		select {
		case <-answered:
		case <-r.c.cfg.Clock.After(nodePortWait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	initial, err := reg.register(ctx, prov, existing)
	if err != nil && kapi.dropOwnPort(ctx, err) {
		initial, err = reg.register(ctx, prov, existing)
	}
	if err != nil {
		return nil, err
	}
	kapi.registered(initial, prov.PostStatus)
	return initial, nil
}

// vnodeConfig is what the virtual node's provider gets from the agent and
// from this run (newVirtualNode adds the Target's own fields).
func (r *targetRun) vnodeConfig(ctx context.Context, parent string, kapi *kubeletAPI, changed <-chan struct{}) vnode.Config {
	c := r.c
	return vnode.Config{
		ClusterUID:   c.cfg.ClusterUID,
		ParentName:   parent,
		GroupKeys:    c.cfg.GroupKeys,
		SharePercent: func() int { return sharePercent(r.target, len(c.targetLister.ListKeys())) },
		Parents:      func() int { return len(c.targetLister.ListKeys()) },
		Reconnected: func(time.Duration) {
			select {
			case r.reconnected <- struct{}{}:
			default:
			}
		},
		Nodes:           c.nodes,
		Pods:            c.pods,
		Changed:         changed,
		Ready:           c.readiness.ready,
		Reported:        func(at time.Time) { r.status.reported(ctx, at) },
		KubeletEndpoint: kapi.hostPort,
		Reserves:        kapi.mode != KubeletAPIOff,
		GatewayKey:      c.cfg.Peers.PublicKeyOrNone,
		GatewaySubtree:  c.cfg.Peers.SubtreeAnnotation,
		GatewayPaths:    c.cfg.Peers.PathsAnnotation,
		ChildPodCIDRs:   c.cfg.ChildPodCIDRs,
		Clock:           c.cfg.Clock,
	}
}

// forwardConfig is what the forwarder gets from the agent and from this
// run (newForwarding adds the parent pods and the recorders).
func (r *targetRun) forwardConfig(parent string, avoider forward.Avoider) forward.Config {
	t := r.target
	return forward.Config{
		AllServices:       r.c.cfg.Peers != nil,
		TargetName:        t.Name,
		TargetUID:         t.UID,
		ClusterName:       t.Spec.ClusterName,
		ParentName:        parent,
		BounceTimeout:     r.c.cfg.BounceTimeout,
		HeldMaxAge:        r.c.cfg.HeldMaxAge,
		TrustedSchedulers: r.c.cfg.TrustedSchedulers,
		Child:             r.c.cfg.Client,
		ChildPods:         r.c.cfg.Factory.CoreV1().Pods().Informer(),
		Avoider:           avoider,
		Metrics:           r.c.cfg.Metrics,
		CopiesNamespace:   r.c.cfg.Namespace,
		Keeper:            r.c.keeper,
		// Never Ready, never run: nothing was forwarded for it yet.
		New: t.Status.NodeName == "" && !r.started,
	}
}

// originAPI is where the parent's pods call their API server from here
// (--pod-api), nil for this cluster's: the parent's with origin, and with
// auto where its gateway relays it here (the pods of a tree with gateways
// call the cluster they were made in). relay learns from the virtual node
// whether it does.
func (r *targetRun) originAPI(id *join.Identity, relay *peers.ParentRelay, existing *corev1.Node) *forward.OriginAPI {
	switch {
	case r.c.cfg.PodAPI == PodAPIOrigin:
		o := &forward.OriginAPI{URL: id.ParentURL, CA: id.CAData}
		if r.c.cfg.Peers != nil {
			relay.Set(existing)
			o.Relay = relay.Get
		}
		return o
	case r.c.cfg.PodAPI == PodAPIAuto && r.c.cfg.Peers != nil:
		relay.Set(existing)
		return &forward.OriginAPI{URL: id.ParentURL, CA: id.CAData, Relay: relay.Get, RelayOnly: true}
	}
	return nil
}

// hold keeps a started run going, renewing the node certificate in place,
// until something ends it: the parent reachable again after an outage, the
// parent's proxy changed, the node or pod controller stopped, or a
// certificate that expired unrenewed.
func (r *targetRun) hold(ctx context.Context, renewal *renewal, nc *node.NodeController, pc *node.PodController, proxyChanged <-chan struct{}) error {
	for {
		select {
		case <-r.reconnected:
			return errReconnected
		case <-ctx.Done():
			return ctx.Err()
		case <-proxyChanged:
			return errProxyChanged
		case <-nc.Done():
			return nodeError(nc.Err(), r.target)
		case <-pc.Done():
			return join.Errorf(v1alpha1.ReasonNodeError, pc.Err(), "forwarding pods stopped")
		case <-renewal.due():
			if err := renewal.renew(ctx); err != nil {
				return err
			}
		}
	}
}

// startControllers waits until the node controller is ready, then starts
// forwarding the pods and waits until the pod controller is ready too.
func (r *targetRun) startControllers(ctx, runCtx context.Context, nc *node.NodeController, nodeClient kubernetes.Interface, pods *forwarding) (*node.PodController, error) {
	select {
	case <-nc.Ready():
	case <-nc.Done():
		return nil, nodeError(nc.Err(), r.target)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	pc, err := pods.start(runCtx, nodeClient, r.c.cfg.PodWorkers)
	if err != nil {
		return nil, err
	}
	select {
	case <-pc.Ready():
		return pc, nil
	case <-pc.Done():
		return nil, join.Errorf(v1alpha1.ReasonNodeError, pc.Err(), "forwarding pods stopped")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// parentName is the parent's cluster name as published by the parent, or
// its API server's host:port when it publishes none.
func parentName(id *join.Identity, t *v1alpha1.Target) string {
	if id.ParentClusterName != "" {
		return id.ParentClusterName
	}
	if u, err := url.Parse(t.Spec.ParentURL); err == nil {
		return u.Host
	}
	return t.Spec.ParentURL
}

func nodeError(err error, t *v1alpha1.Target) error {
	if err == nil {
		err = errors.New("node controller stopped")
	}
	if apierrors.IsForbidden(err) {
		return join.Errorf(v1alpha1.ReasonNodeError, err,
			"the parent refused the virtual node (NodeRestriction forbids some labels or taints): check spec.labels")
	}
	return join.Errorf(v1alpha1.ReasonNodeError, join.Classify(err, t.Spec.ParentURL), "running the virtual node failed; retrying")
}

func reportFrequency(t *v1alpha1.Target) time.Duration {
	if t.Spec.ReportFrequency.Duration > 0 {
		return t.Spec.ReportFrequency.Duration
	}
	d, _ := time.ParseDuration(v1alpha1.DefaultReportFrequency)
	return d
}
