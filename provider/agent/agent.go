// Package agent is the Nestlet agent of one cluster, wired from its two
// sides: the child's side (provider/child) joins each parent a Target
// names and runs a virtual node there, and the parent's side
// (provider/parent) looks after the virtual nodes of this cluster's own
// children; with a gateway (provider/peers), both route pod traffic
// through it. The folder map of the repository is docs/layout.md.
package agent

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/pkg/version"
	"github.com/nestlet/nestlet/provider/child"
	"github.com/nestlet/nestlet/provider/forward"
	"github.com/nestlet/nestlet/provider/parent"
	"github.com/nestlet/nestlet/provider/peers"
)

// Values of Config.PodAPI.
const (
	PodAPIAuto   = child.PodAPIAuto
	PodAPILocal  = child.PodAPILocal
	PodAPIOrigin = child.PodAPIOrigin
)

// Values of Config.KubeletAPI.
const (
	KubeletAPIAuto   = child.KubeletAPIAuto
	KubeletAPITunnel = child.KubeletAPITunnel
	KubeletAPIDirect = child.KubeletAPIDirect
	KubeletAPIOff    = child.KubeletAPIOff
)

// DefaultOutageTolerance is Config.OutageTolerance's default.
const DefaultOutageTolerance = child.DefaultOutageTolerance

// DefaultNamespaceIdle is Config.NamespaceIdle's default.
const DefaultNamespaceIdle = forward.DefaultNamespaceIdle

// DefaultPodCIDRPoolShareBits is Config.PodCIDRPoolShareBits' default.
const DefaultPodCIDRPoolShareBits = parent.DefaultPoolShareBits

// GatewayConfig runs a gateway in the agent (provider/peers).
type GatewayConfig = peers.Config

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
	// HeldMaxAge: how long a place held here for a parent's pod is kept
	// without the parent asking again. Default api.HeldMaxAge.
	HeldMaxAge time.Duration
	// NamespaceIdle: how long a namespace the agent made for its parents'
	// pods may hold none of their pods, Services or claims before it is
	// deleted. Default forward.DefaultNamespaceIdle; negative, never.
	NamespaceIdle time.Duration
	// TrustedSchedulers are the parents' schedulers whose pods are
	// forwarded without the toleration of the virtual nodes' taint.
	// Default forward.DefaultTrustedSchedulers.
	TrustedSchedulers []string
	// PodAPI is which API server the parents' pods talk to:
	// PodAPIOrigin, the parent's, with tokens the parent issues
	// (provider/forward/pod_api_identity.go), through the parent's
	// gateway relay where it offers one, else at the parent's URL;
	// PodAPILocal, this cluster's, with its tokens, as the kubelet mounts
	// them; PodAPIAuto (default), the parent's where its gateway relays
	// its API server to this cluster's pods, else this cluster's.
	PodAPI string
	// KubeletAPI is how virtual nodes serve the kubelet API (logs, exec,
	// attach, port-forward): KubeletAPIAuto (default), KubeletAPITunnel,
	// KubeletAPIDirect or KubeletAPIOff.
	KubeletAPI string
	// DirectAddress is the IP (or IP:port, with one Target) the kubelet API
	// listens on and virtual nodes advertise in direct mode.
	DirectAddress string
	// Client and Targets replace the clients built from RESTConfig, and
	// Ready the check of this cluster's /readyz (all optional): cmd/nestlet
	// passes the client it also elects its leader with, and a hollow child
	// (test/hollow) runs a real agent over a simulated cluster.
	Client  kubernetes.Interface
	Targets v1alpha1.TargetInterface
	Ready   func(context.Context) error
	// Gateway, when set, runs a gateway in the agent: WireGuard peers,
	// the parents' gateways and the children's, that carry pod traffic
	// between the clusters (GatewayConfig).
	Gateway *GatewayConfig
	// PodCIDRPool are the pod CIDRs a child without a grant of its own
	// (api.PodCIDRGrantsConfigMap, `nestctl grant`) may claim a share of,
	// first come; a share is at most a /PodCIDRPoolShareBits of IPv4
	// addresses (default parent.DefaultPoolShareBits). Without a pool or
	// a grant, a child is routed none of the pod CIDRs it claims.
	PodCIDRPool          []netip.Prefix
	PodCIDRPoolShareBits int
	// ChildTaintEffect is the effect of the provider taint on the
	// children's virtual nodes here (parent.Config.ChildTaintEffect).
	ChildTaintEffect corev1.TaintEffect
	// Metrics receives the agent's Prometheus metrics (optional).
	Metrics prometheus.Registerer
	Clock   clock.WithTicker
	// Volumes provisions the "nestlet" StorageClass's volumes in this
	// cluster (parent.NewVolumes, made before any client of the process
	// decodes; none: that class's claims stay Pending).
	Volumes *parent.Volumes
}

// Agent runs the two sides of one cluster's agent. New builds the clients
// and the shared informers, Run starts both sides.
type Agent struct {
	cfg     Config
	client  kubernetes.Interface
	targets v1alpha1.TargetInterface
	// factory holds the informers of this cluster's nodes and pods, which
	// both sides read.
	factory *kubeclient.CoreFactory
	metrics *forward.Metrics
}

// NewVolumes makes the provisioner of the "nestlet" StorageClass for
// Config.Volumes. Call it before any API client of the process decodes a
// response (parent.NewVolumes says why).
func NewVolumes(ctx context.Context, client kubernetes.Interface) *parent.Volumes {
	return parent.NewVolumes(ctx, client)
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
		cfg.PodAPI = PodAPIAuto
	case PodAPIAuto, PodAPILocal, PodAPIOrigin:
	default:
		return nil, fmt.Errorf("agent: unknown pod API %q: use %s, %s or %s", cfg.PodAPI, PodAPIAuto, PodAPILocal, PodAPIOrigin)
	}
	if g := cfg.Gateway; g != nil && g.APIAddress != "" {
		if _, err := peers.ParseAPIAddress(g.APIAddress); err != nil {
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
		if client, err = kubernetes.NewForConfig(kubeclient.Protobuf(cfg.RESTConfig)); err != nil {
			return nil, err
		}
	}
	if targets == nil {
		if targets, err = v1alpha1.NewTargetClient(cfg.RESTConfig); err != nil {
			return nil, err
		}
	}
	return &Agent{cfg: cfg, client: client, targets: targets,
		factory: kubeclient.NewCoreFactory(client, nil, kubeclient.StripManagedFields),
		metrics: forward.NewMetrics(cfg.Metrics),
	}, nil
}

// childrenDecidedPatience bounds how long the Targets' runs wait for the
// parent's side to decide the children's pod CIDRs.
const childrenDecidedPatience = 30 * time.Second

// Run runs the agent until ctx is cancelled.
func (a *Agent) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ns, err := a.client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading kube-system to identify this cluster: %w", err)
	}
	clusterUID := string(ns.UID)
	if _, err := a.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.Namespace}}, metav1.CreateOptions{FieldManager: api.FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", a.cfg.Namespace, err)
	}
	nodeInformer := a.factory.CoreV1().Nodes()

	var gw *peers.Peers
	if a.cfg.Gateway != nil {
		if gw, err = peers.Start(a.cfg.Gateway, nodeInformer.Lister(), a.cfg.RESTConfig.Host); err != nil {
			return fmt.Errorf("starting the gateway: %w", err)
		}
		defer gw.Close()
		if node := a.cfg.Gateway.NodeName; node != "" {
			gw.PublishRoutes(ctx, a.client, a.cfg.Namespace, node)
		}
		go gw.RunDirect(ctx, a.cfg.Clock)
		if a.cfg.Metrics != nil {
			if err := a.cfg.Metrics.Register(gw.Collector()); err != nil {
				return err
			}
		}
		if _, err := nodeInformer.Informer().AddEventHandler(gw.OwnNodeEvents(ctx)); err != nil {
			return err
		}
	}

	parents, err := parent.New(parent.Config{Client: a.client, Nodes: nodeInformer, Namespace: a.cfg.Namespace,
		PodCIDRPool: a.cfg.PodCIDRPool, PodCIDRPoolShareBits: a.cfg.PodCIDRPoolShareBits, Peers: gw, Clock: a.cfg.Clock,
		ChildTaintEffect: a.cfg.ChildTaintEffect, Volumes: a.cfg.Volumes})
	if err != nil {
		return err
	}
	children, err := child.New(child.Config{
		RESTConfig: a.cfg.RESTConfig, Client: a.client, Targets: a.targets, Factory: a.factory,
		Namespace: a.cfg.Namespace, ClusterUID: clusterUID, GroupKeys: a.cfg.GroupKeys,
		LeaseDurationSeconds: a.cfg.LeaseDurationSeconds, OutageTolerance: a.cfg.OutageTolerance, Ready: a.cfg.Ready,
		PodWorkers: a.cfg.PodWorkers, BounceTimeout: a.cfg.BounceTimeout, HeldMaxAge: a.cfg.HeldMaxAge, TrustedSchedulers: a.cfg.TrustedSchedulers,
		PodAPI: a.cfg.PodAPI, KubeletAPI: a.cfg.KubeletAPI, DirectAddress: a.cfg.DirectAddress, NamespaceIdle: a.cfg.NamespaceIdle,
		Peers: gw, ChildPodCIDRs: parents.ChildPodCIDRs, Metrics: a.metrics, Clock: a.cfg.Clock,
	})
	if err != nil {
		return err
	}
	a.factory.Start(ctx.Done())
	defer a.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodeInformer.Informer().HasSynced, a.factory.CoreV1().Pods().Informer().HasSynced) {
		return fmt.Errorf("waiting for caches to sync: %w", ctx.Err())
	}
	logger.Info("Agent started", "version", version.String(), "clusterUID", clusterUID, "namespace", a.cfg.Namespace)

	var wg sync.WaitGroup
	wg.Go(func() { parents.Run(ctx) })
	wg.Go(func() {
		// The Targets' first summaries carry this cluster's children's
		// pod CIDRs: the parent's side decides them first (for a while
		// at most: a parent's side that cannot read what it needs leaves
		// the children's out, and holds back nothing else).
		select {
		case <-parents.Ready():
		case <-time.After(childrenDecidedPatience):
			logger.Info("The children's pod CIDRs are not decided yet; the summaries carry none of them until they are")
		case <-ctx.Done():
			return
		}
		if err := children.Run(ctx, a.cfg.Workers); err != nil && ctx.Err() == nil {
			logger.Error(err, "Running the Targets")
		}
	})
	<-ctx.Done()
	wg.Wait()
	return nil
}
