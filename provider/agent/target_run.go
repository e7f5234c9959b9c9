package agent

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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/virtual-kubelet/virtual-kubelet/node"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

// Reasons after which retrying the same spec is pointless: the runner waits
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

// targetRun joins one parent for one generation of a Target and keeps its
// virtual node running.
type targetRun struct {
	a          *Agent
	target     *v1alpha1.Target
	generation int64
	cancel     context.CancelFunc
	done       chan struct{}
	status     runStatus
	// discovered is what the parent published in nestlet-info when this
	// run discovered it (nil map: nothing), taken by the kubelet API
	// set-up of the same run instead of reading it again.
	discovered *map[string]string
	// started is set once a run of this runner forwarded pods.
	started bool
	// reconnected receives a value when the parent is reachable again
	// after an outage.
	reconnected chan struct{}
}

func newTargetRun(a *Agent, t *v1alpha1.Target) *targetRun {
	return &targetRun{a: a, target: t, generation: t.Generation, done: make(chan struct{}), reconnected: make(chan struct{}, 1)}
}

func (r *targetRun) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("target", r.target.Name, "parent", r.target.Spec.ParentURL))
	go r.run(ctx)
}

// stop cancels the runner and waits for it; its virtual node is left in
// the parent (a new runner takes it over, or leave removes it).
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
		r.setReady(ctx, metav1.ConditionFalse, reason, msg)
		if terminalReasons[reason] {
			<-ctx.Done()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-r.a.cfg.Clock.After(backoff.Step()):
		}
	}
}

// once joins (or reuses the stored identity) and runs the virtual node until
// ctx ends or something ends the run (hold).
func (r *targetRun) once(ctx context.Context) error {
	if err := validateSpec(r.target); err != nil {
		return err
	}
	id, err := r.identity(ctx)
	if err != nil {
		return err
	}
	r.setIdentity(id)
	cert, err := join.NewClientCert(id)
	if err != nil {
		return err
	}
	cfg, err := id.RotatingRESTConfig(cert)
	if err != nil {
		return err
	}
	nodeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	reg := newRegistrar(nodeClient, r.target, r.a.clusterUID, r.a.cfg.LeaseDurationSeconds, r.a.cfg.Clock)
	// Right after a join the node is looked up only if creating it finds
	// one (register).
	var existing *corev1.Node
	if r.discovered == nil {
		if existing, err = reg.ownNode(ctx); err != nil {
			return err
		}
	}
	kapi, err := r.chooseKubeletAPI(ctx, id, cert, nodeClient)
	r.discovered = nil // later runs read it afresh
	if err != nil {
		return err
	}
	select { // an outage reported by an earlier run is over
	case <-r.reconnected:
	default:
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed, unsubscribe := r.a.changes.subscribe()
	defer unsubscribe()
	prov, err := r.newProvider(ctx, id, nodeClient, kapi.hostPort, changed)
	if err != nil {
		kapi.close()
		return err
	}
	pods, err := r.newForwarding(runCtx, nodeClient, prov, parentName(id, r.target))
	if err != nil {
		kapi.close()
		return err
	}
	if err := kapi.serve(runCtx, r.target.Spec.ClusterName, pods.fwd, r.a); err != nil {
		return err
	}
	initial, err := reg.register(ctx, prov, existing)
	if err != nil {
		return err
	}
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
		r.setPodCIDRs(own)
	}
	go r.checkPodCIDRs(runCtx, nodeClient, prov)
	watchOwnNode(runCtx, nodeClient, r.target.Spec.ClusterName, r.a.cfg.Clock, prov.PostStatus)
	t := r.target
	r.setReady(ctx, metav1.ConditionTrue, v1alpha1.ReasonReporting,
		fmt.Sprintf("virtual node %s is registered in the parent and reports every %s; %s", t.Spec.ClusterName, reportFrequency(t), kapi.describe()))

	return r.hold(ctx, newRenewal(r, id, cert), nc, pc, r.watchProxy(runCtx, nodeClient, kapi))
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
	pc, err := pods.start(runCtx, nodeClient, r.a.cfg.PodWorkers)
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
