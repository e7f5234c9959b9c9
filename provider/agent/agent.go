// Package agent is the Nestlet agent of one cluster. For every Target of
// its cluster it joins that parent and runs a virtual node there; it also
// decorates the virtual nodes of its own children (role label, taints).
// Targets are watched: adding, changing or deleting one takes effect at
// run time. One type per controller, one file each:
//
//   - agent.go: Agent, its Config; New builds the shared parts, Run wires
//     and starts the controllers below.
//   - target_controller.go: "a Target was added, edited or deleted"
//     (targetController): one run per Target generation; leaving the
//     parent and the finalizer on deletion.
//   - target_status.go: the Targets' status written only when it changed
//     (statusWriter); run_status.go: what one run writes there (runStatus).
//   - target_run.go: one Target's run (targetRun): join or reuse the
//     identity, run the virtual node until something ends it, back off,
//     again.
//   - identity.go: the node identity, stored or got by joining (joiner).
//   - registration.go: the virtual node created or adopted in the parent
//     and virtual-kubelet's node controller over it (registrar), sparing
//     the parent repeated requests (registration).
//   - virtualnode.go: the virtual node's provider (provider/vnode).
//   - renewal.go: the node certificate renewed and rotated in place
//     (renewal).
//   - pod_controller.go: "a parent pod changed" (forwarding):
//     virtual-kubelet's pod controller over the forwarder
//     (provider/forward: lifecycle.go creates, updates, deletes delegates;
//     reconcile.go puts back a status someone else changed).
//   - kubeletapi.go: the virtual node's kubelet API, tunnel or direct
//     (kubeletAPI), bound before the node registers, served with the
//     forwarder's delegates.
//   - readiness.go: this cluster's readiness for the virtual nodes'
//     pings, with outage tolerance (readiness).
//   - decorator.go, podcidrs.go: the virtual nodes of this cluster's own
//     children (role label, taints, pod CIDR overlaps).
//   - volumes.go: the provisioner of the "nestlet" StorageClass, whose
//     volumes are pinned to a child's virtual node.
//   - tunnels.go, tunnels_status.go: the gateway (Config.Gateway), its
//     peers and routes, and the tunnels' state (tunnels); tunnels_api.go
//     its relay to this cluster's API server; tunnels_nodes.go its node
//     and routes published for the other nodes' route agents.
//   - ownnode.go, secrets.go, changes.go, validate.go: helpers of the
//     above.
package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/pkg/quota"
	"github.com/nestlet/nestlet/pkg/revoked"
	"github.com/nestlet/nestlet/pkg/version"
	"github.com/nestlet/nestlet/provider/forward"
)

// Values of Config.PodAPI.
const (
	PodAPILocal  = "local"
	PodAPIOrigin = "origin"
)

// DefaultTrustedSchedulers is Config.TrustedSchedulers' default.
var DefaultTrustedSchedulers = forward.DefaultTrustedSchedulers

// Config of an Agent.
type Config struct {
	// RESTConfig reaches this cluster's API server. Required.
	RESTConfig *rest.Config
	// Namespace holds the node identities (Secrets). Default nestlet-system.
	Namespace string
	// GroupKeys group nodes in summaries. Default api.DefaultGroupKeys.
	GroupKeys []string
	// LeaseDurationSeconds of the virtual nodes' leases. Default 40.
	LeaseDurationSeconds int32
	// OutageTolerance is how long this cluster's API server may fail its
	// readiness check while the virtual nodes still renew their leases and
	// post their status in the parents, as a kubelet keeps renewing while
	// its container runtime is briefly down: the pods here keep running
	// meanwhile. Past it the nodes stop renewing, and each parent marks its
	// node lost after its own grace period. Default 30s; negative: none.
	OutageTolerance time.Duration
	// Workers reconciling Targets. Default 8 (a sync is a few requests at
	// most; the joins themselves run apart from the workers).
	Workers int
	// PodWorkers per Target forwarding pods. Default 50.
	PodWorkers int
	// BounceTimeout: how long a forwarded pod may stay unschedulable here
	// before it is bounced back to the parent. Default 30s.
	BounceTimeout time.Duration
	// TrustedSchedulers are the parents' schedulers whose pods are
	// forwarded without the toleration of the virtual nodes' taint.
	// Default forward.DefaultTrustedSchedulers.
	TrustedSchedulers []string
	// PodAPI is which API server the parents' pods talk to:
	// PodAPILocal (default), this cluster's, with its tokens, as the
	// kubelet mounts them; PodAPIOrigin, the parent's, with tokens the
	// parent issues (provider/forward/identity.go), reached at the
	// parent's URL.
	PodAPI string
	// KubeletAPI is how virtual nodes serve the kubelet API (logs, exec,
	// attach, port-forward): KubeletAPIAuto (default), KubeletAPITunnel,
	// KubeletAPIDirect or KubeletAPIOff.
	KubeletAPI string
	// DirectAddress is the IP (or IP:port, with one Target) the kubelet API
	// listens on and virtual nodes advertise in direct mode.
	DirectAddress string
	// Client and Targets replace the clients built from RESTConfig, and
	// Ready the check of this cluster's /readyz (all optional): a hollow
	// child (test/hollow) runs a real agent over a simulated cluster.
	Client  kubernetes.Interface
	Targets v1alpha1.TargetInterface
	Ready   func(context.Context) error
	// Gateway, when set, runs a gateway in the agent: WireGuard tunnels
	// to the parents and from the children that carry pod traffic
	// between the clusters (GatewayConfig).
	Gateway *GatewayConfig
	// Metrics receives the agent's Prometheus metrics (optional).
	Metrics prometheus.Registerer
	Clock   clock.WithTicker
}

// Agent runs the Targets of one cluster. New builds its parts, Run starts
// them; the runs of the Targets share them.
type Agent struct {
	cfg     Config
	client  kubernetes.Interface
	targets v1alpha1.TargetInterface
	// clusterUID identifies this cluster (kube-system's UID), read by Run.
	clusterUID string

	// factory holds the informers of this cluster's nodes and pods.
	factory      *kubeclient.CoreFactory
	nodes        corelisters.NodeLister
	pods         corelisters.PodLister
	targetWatch  cache.SharedIndexInformer
	targetLister cache.Indexer
	secrets      *ownSecrets
	// status writes the Targets' status.
	status *statusWriter
	// changes tells the virtual nodes that a node or pod changed here.
	changes *broadcaster
	metrics *forward.Metrics
	// readiness answers every virtual node's ping.
	readiness *readiness
	// tunnels is the gateway and its peers (nil without Config.Gateway).
	tunnels *tunnels
}

// New checks cfg, fills its defaults and builds the clients.
func New(cfg Config) (*Agent, error) {
	if cfg.RESTConfig == nil {
		return nil, fmt.Errorf("agent: RESTConfig is required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = api.DefaultNamespace
	}
	switch cfg.KubeletAPI {
	case "":
		cfg.KubeletAPI = KubeletAPIAuto
	case KubeletAPIAuto, KubeletAPITunnel, KubeletAPIOff:
	case KubeletAPIDirect:
		if cfg.DirectAddress == "" {
			return nil, fmt.Errorf("agent: kubelet API mode %q needs a direct address", cfg.KubeletAPI)
		}
	default:
		return nil, fmt.Errorf("agent: unknown kubelet API mode %q: use auto, tunnel, direct or off", cfg.KubeletAPI)
	}
	switch cfg.PodAPI {
	case "":
		cfg.PodAPI = PodAPILocal
	case PodAPILocal, PodAPIOrigin:
	default:
		return nil, fmt.Errorf("agent: unknown pod API %q: use %s or %s", cfg.PodAPI, PodAPILocal, PodAPIOrigin)
	}
	if g := cfg.Gateway; g != nil && g.APIAddress != "" {
		if _, err := parseAPIAddress(g.APIAddress); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	if cfg.GroupKeys == nil {
		cfg.GroupKeys = api.DefaultGroupKeys
	}
	if cfg.LeaseDurationSeconds == 0 {
		cfg.LeaseDurationSeconds = 40
	}
	if cfg.OutageTolerance == 0 {
		cfg.OutageTolerance = DefaultOutageTolerance
	}
	if cfg.Workers == 0 {
		cfg.Workers = 8
	}
	if cfg.PodWorkers == 0 {
		cfg.PodWorkers = 50
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	client, targets := cfg.Client, cfg.Targets
	var err error
	if client == nil {
		if client, err = kubernetes.NewForConfig(cfg.RESTConfig); err != nil {
			return nil, err
		}
	}
	if targets == nil {
		if targets, err = v1alpha1.NewTargetClient(cfg.RESTConfig); err != nil {
			return nil, err
		}
	}
	a := &Agent{cfg: cfg, client: client, targets: targets,
		factory:     kubeclient.NewCoreFactory(client, nil, kubeclient.StripManagedFields),
		targetWatch: newTargetInformer(targets),
		secrets:     newOwnSecrets(client, cfg.Namespace),
		changes:     newBroadcaster(),
		metrics:     forward.NewMetrics(cfg.Metrics),
		readiness:   newReadiness(client, cfg.Ready, cfg.OutageTolerance, cfg.Clock),
	}
	a.nodes, a.pods = a.factory.CoreV1().Nodes().Lister(), a.factory.CoreV1().Pods().Lister()
	// The informer of every pod here (for the summary) also holds every
	// Target's delegates for its forwarder: one watch of the pods, not
	// one more per Target.
	if err := a.factory.CoreV1().Pods().Informer().AddIndexers(forward.DelegateIndexers()); err != nil {
		return nil, err
	}
	a.targetLister = a.targetWatch.GetIndexer()
	a.status = &statusWriter{targets: targets, lister: a.targetLister}
	return a, nil
}

// Run runs the agent until ctx is cancelled.
func (a *Agent) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ns, err := a.client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading kube-system to identify this cluster: %w", err)
	}
	a.clusterUID = string(ns.UID)
	if _, err := a.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Namespace}}, metav1.CreateOptions{FieldManager: fieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", a.cfg.Namespace, err)
	}

	nodeInformer := a.factory.CoreV1().Nodes()
	podInformer := a.factory.CoreV1().Pods()
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.changes.notify() },
		UpdateFunc: func(any, any) { a.changes.notify() },
		DeleteFunc: func(any) { a.changes.notify() },
	}
	if _, err := nodeInformer.Informer().AddEventHandler(notify); err != nil {
		return err
	}
	if _, err := podInformer.Informer().AddEventHandler(notify); err != nil {
		return err
	}

	if a.cfg.Gateway != nil {
		if a.tunnels, err = startTunnels(a.cfg.Gateway, a.nodes, a.cfg.RESTConfig.Host); err != nil {
			return fmt.Errorf("starting the gateway: %w", err)
		}
		defer a.tunnels.close()
		if node := a.cfg.Gateway.NodeName; node != "" {
			nr := newNodeRoutes(a.client, a.cfg.Namespace, node)
			a.tunnels.routed = nr.set
			nr.set(nil)
			go nr.run(ctx)
		}
		if a.cfg.Metrics != nil {
			if err := a.cfg.Metrics.Register(newTunnelMetrics(a.tunnels)); err != nil {
				return err
			}
		}
		if _, err := nodeInformer.Informer().AddEventHandler(a.tunnels.ownNodeEvents(ctx)); err != nil {
			return err
		}
	}

	tc, err := newTargetController(a.targets, a.targetWatch, a.status, a.store(), a.clusterUID, a.cfg.Clock,
		func(t *v1alpha1.Target) *targetRun { return newTargetRun(a, t) })
	if err != nil {
		return err
	}
	dc, err := newDecorator(a.client, nodeInformer, a.cfg.Clock, a.tunnels)
	if err != nil {
		return err
	}
	rev := revoked.New(a.client, func(map[string]bool) { dc.enqueueAll() })
	dc.revoked = rev
	quotas := quota.New(a.client)
	dc.quotas = &childQuotas{quotas: quotas, recorder: newRecorder(ctx, a.client, ""), warned: map[string]string{}}
	ap, err := newApprover(a.client, rev, nodeInformer.Lister())
	if err != nil {
		return err
	}
	a.factory.Start(ctx.Done())
	go a.targetWatch.RunWithContext(ctx)
	// Not waited for: without it every Secret is read from the API server.
	go a.secrets.run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.Informer().HasSynced, podInformer.Informer().HasSynced, a.targetWatch.HasSynced) {
		return fmt.Errorf("waiting for caches to sync: %w", ctx.Err())
	}
	logger.Info("Agent started", "version", version.String(), "clusterUID", a.clusterUID, "namespace", a.cfg.Namespace)

	var wg sync.WaitGroup
	wg.Go(func() { dc.run(ctx) })
	wg.Go(func() { ap.run(ctx) })
	wg.Go(func() { rev.Run(ctx) })
	wg.Go(func() { quotas.Run(ctx) })
	wg.Go(func() { tc.run(ctx, a.cfg.Workers) })
	wg.Go(func() { runVolumes(ctx, a.client, a.nodes) })
	<-ctx.Done()
	wg.Wait()
	a.factory.Shutdown()
	return nil
}
