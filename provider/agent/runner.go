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
	"github.com/nestlet/nestlet/provider/vnode"
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

// runner joins one parent for one generation of a Target and keeps its
// virtual node running.
type runner struct {
	a          *Agent
	target     *v1alpha1.Target
	generation int64
	cancel     context.CancelFunc
	done       chan struct{}
	status     runnerStatus
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

func newRunner(a *Agent, t *v1alpha1.Target) *runner {
	return &runner{a: a, target: t, generation: t.Generation, done: make(chan struct{}), reconnected: make(chan struct{}, 1)}
}

func (r *runner) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("target", r.target.Name, "parent", r.target.Spec.ParentURL))
	go r.run(ctx)
}

// stop cancels the runner and waits for it; its virtual node is left in
// the parent (a new runner takes it over, or leave removes it).
func (r *runner) stop() {
	r.cancel()
	<-r.done
}

func (r *runner) run(ctx context.Context) {
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
// ctx ends, the node controller fails, or the certificate is renewed.
func (r *runner) once(ctx context.Context) error {
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
	// Right after a join the node is looked up only if creating it finds
	// one (register).
	var existing *corev1.Node
	if r.discovered == nil {
		if existing, err = r.ownNode(ctx, nodeClient); err != nil {
			return err
		}
	}
	delegates := &lazyDelegates{}
	kapi, err := r.setupKubeletAPI(ctx, id, cert, nodeClient, delegates)
	r.discovered = nil // later runs read it afresh
	if err != nil {
		return err
	}
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	if kapi.run != nil {
		go kapi.run(kctx)
	}
	select { // an outage reported by an earlier run is over
	case <-r.reconnected:
	default:
	}
	changed, unsubscribe := r.a.changes.subscribe()
	defer unsubscribe()
	prov, err := r.newProvider(ctx, id, nodeClient, kapi.hostPort, changed)
	if err != nil {
		return err
	}
	reg := &registration{clock: r.a.cfg.Clock}
	initial, err := r.register(ctx, nodeClient, prov, existing, reg)
	if err != nil {
		return err
	}
	nc, err := r.newNodeController(nodeClient, prov, initial, reg)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		<-nc.Done()
	}()
	go func() { _ = nc.Run(runCtx) }()
	pc, err := r.startControllers(ctx, runCtx, nc, nodeClient, prov, parentName(id, r.target), delegates)
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

	return r.hold(ctx, id, cert, nc, pc, r.watchProxy(runCtx, nodeClient, kapi))
}

// hold keeps a started run going, renewing the node certificate in place,
// until something ends it.
func (r *runner) hold(ctx context.Context, id *join.Identity, cert *join.ClientCert, nc *node.NodeController, pc *node.PodController, proxyChanged <-chan struct{}) error {
	renew := r.a.cfg.Clock.After(id.RenewAt().Sub(r.a.cfg.Clock.Now()))
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
		case <-renew:
			next, err := r.renew(ctx, id)
			if err == nil {
				err = cert.Rotate(next)
			}
			now := r.a.cfg.Clock.Now()
			if err != nil {
				if !now.Before(id.NotAfter()) {
					return join.Errorf(v1alpha1.ReasonNodeError, err, "the node certificate expired and could not be renewed; joining again")
				}
				retry := min(renewRetry, id.NotAfter().Sub(now)/4)
				klog.FromContext(ctx).Error(err, "Renewing the node certificate failed; retrying while the current one is valid", "notAfter", id.NotAfter(), "after", retry)
				renew = r.a.cfg.Clock.After(retry)
				continue
			}
			id = next
			r.setIdentity(id)
			r.setJoined(ctx)
			renew = r.a.cfg.Clock.After(id.RenewAt().Sub(now))
		}
	}
}

// renewRetry is the longest wait before renewing again after a failure.
const renewRetry = 30 * time.Second

// startControllers waits until the node controller is ready, then starts
// the pod controller and waits until it is ready too.
func (r *runner) startControllers(ctx, runCtx context.Context, nc *node.NodeController, nodeClient kubernetes.Interface, prov *vnode.Provider, parent string, delegates *lazyDelegates) (*node.PodController, error) {
	select {
	case <-nc.Ready():
	case <-nc.Done():
		return nil, nodeError(nc.Err(), r.target)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	pc, err := r.startPods(runCtx, nodeClient, prov, parent, delegates)
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

// ready fails when this cluster's API server is not ready, and has not
// been for longer than Config.OutageTolerance since its last good check.
// One answer serves every Target for readyTTL.
func (a *Agent) ready(ctx context.Context) error {
	a.readyMu.Lock()
	defer a.readyMu.Unlock()
	if now := a.cfg.Clock.Now(); !a.readyAt.IsZero() && now.Sub(a.readyAt) < readyTTL {
		return a.readyErr
	}
	check := a.checkReady
	if a.cfg.Ready != nil {
		check = a.cfg.Ready
	}
	err := check(ctx)
	a.readyAt = a.cfg.Clock.Now()
	a.readyErr = a.tolerate(ctx, err, a.readyAt)
	return a.readyErr
}

// tolerate returns err, or nil while this cluster's API server has been
// failing for less than the outage tolerance after a good check; it logs
// when an outage starts, when it is no longer tolerated and when it ends.
// Called with readyMu held.
func (a *Agent) tolerate(ctx context.Context, err error, now time.Time) error {
	logger := klog.FromContext(ctx)
	if err == nil {
		if !a.failingSince.IsZero() {
			logger.Info("This cluster's API server is ready again", "outage", now.Sub(a.failingSince).Round(time.Millisecond))
		}
		a.readyOK, a.failingSince, a.outageLogged = now, time.Time{}, false
		return nil
	}
	tol := a.cfg.OutageTolerance
	if a.failingSince.IsZero() {
		a.failingSince = now
		if tol > 0 && !a.readyOK.IsZero() {
			logger.Info("This cluster's API server is not ready; the virtual nodes stay Ready in the parents meanwhile, for at most the outage tolerance", "err", err, "tolerance", tol)
		}
	}
	if tol <= 0 || a.readyOK.IsZero() {
		return err
	}
	if now.Sub(a.readyOK) < tol {
		return nil
	}
	if !a.outageLogged {
		a.outageLogged = true
		logger.Info("This cluster's API server has not been ready for longer than the outage tolerance: the virtual nodes stop renewing their leases, and the parents will mark them lost", "err", err, "tolerance", tol)
	}
	return err
}

func (a *Agent) checkReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := a.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("this cluster's API server is not ready: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("this cluster's API server is not ready: %s", body)
	}
	return nil
}
