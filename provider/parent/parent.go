// Package parent is the parent's side of the agent: what a cluster does
// about the virtual nodes of its own children. The decorator gives them
// what a node may not set on itself (the role label, taints asked after
// registration, version skew, pod CIDR overlaps, the parent's gateway) and
// deletes those of children that left or were revoked; the approver
// decides their node and serving certificate requests; the children's
// capacity quotas are checked; the "nestlet" StorageClass pins volumes to
// them. Nothing here runs for a Target: that is provider/child.
package parent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/kubeclient"
	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/pkg/quota"
	"github.com/nestlet/nestlet/pkg/revoked"
	"github.com/nestlet/nestlet/provider/peers"
)

// Config of the parent's side.
type Config struct {
	// Client reaches this cluster's API server. Required.
	Client kubernetes.Interface
	// Nodes is the informer of this cluster's nodes, started by the
	// caller. Required.
	Nodes coreinformers.NodeInformer
	// Namespace is the agent's, where the children it knows are recorded
	// with their shares of the pod CIDR pool (api.ChildrenConfigMap).
	Namespace string
	// PodCIDRPool are the pod CIDRs a child without a grant of its own
	// (api.PodCIDRGrantsConfigMap) may claim a share of (grants.go); none:
	// such a child is granted nothing. PodCIDRPoolShareBits sizes a share
	// (a /16 of IPv4 by default).
	PodCIDRPool          []netip.Prefix
	PodCIDRPoolShareBits int
	// Peers, when this cluster runs a gateway, are told each child's key
	// and routes (optional).
	Peers *peers.Peers
	// ChildTaintEffect is the effect of the provider taint on the
	// children's virtual nodes (api.ChildTaintEffects; default
	// NoSchedule). A child registers with NoSchedule whatever this says:
	// it is relaxed here, once the node is known as a child's.
	ChildTaintEffect corev1.TaintEffect
	Clock            clock.PassiveClock
	// Volumes provisions the "nestlet" StorageClass's volumes (NewVolumes;
	// none: claims of that class stay Pending here).
	Volumes *Volumes
}

// Parent runs the controllers of the parent's side.
type Parent struct {
	client      kubernetes.Interface
	nodes       coreinformers.NodeInformer
	decorator   *decorator
	approver    *approver
	revoked     *revoked.Watcher
	quotas      *quota.Watcher
	grants      *grants
	admin       *podcidrs.Grants
	kids        *children
	serviceCIDR *serviceCIDRs
	volumes     *Volumes
	// ready is closed once every child present at the start is decided.
	ready chan struct{}
}

// New builds the controllers and registers their handlers on cfg.Nodes:
// call it before the informer starts.
func New(cfg Config) (*Parent, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ChildTaintEffect == "" {
		cfg.ChildTaintEffect = corev1.TaintEffectNoSchedule
	}
	if !slices.Contains(api.ChildTaintEffects, cfg.ChildTaintEffect) {
		return nil, fmt.Errorf("child taint effect %q: want one of %v", cfg.ChildTaintEffect, api.ChildTaintEffects)
	}
	kids := newChildren(cfg.Client, cfg.Namespace, cfg.ChildTaintEffect)
	dc, err := newDecorator(cfg.Client, cfg.Nodes, cfg.Clock, cfg.Peers, kids, cfg.ChildTaintEffect)
	if err != nil {
		return nil, err
	}
	p := &Parent{client: cfg.Client, nodes: cfg.Nodes, decorator: dc, quotas: quota.New(cfg.Client), kids: kids,
		admin: podcidrs.NewGrants(cfg.Client, dc.enqueueAll), serviceCIDR: newServiceCIDRs(cfg.Client), volumes: cfg.Volumes, ready: make(chan struct{})}
	p.grants = newGrants(p.admin, cfg.PodCIDRPool, cfg.PodCIDRPoolShareBits, kids,
		ownAddresses(cfg.Nodes.Lister(), kids, p.serviceCIDR, cfg.Peers))
	dc.grants = p.grants
	p.revoked = revoked.New(cfg.Client, func(map[string]bool) { dc.enqueueAll() })
	dc.revoked = p.revoked
	if p.approver, err = newApprover(cfg.Client, p.revoked, cfg.Nodes.Lister(), kids); err != nil {
		return nil, err
	}
	p.approver.own = p.grants.own
	return p, nil
}

// ChildPodCIDRs says whether n is a child's virtual node (isChild) and,
// for one, the pod CIDRs this cluster grants it (none while not decided):
// what this cluster's own summary carries up of it, never its claim.
func (p *Parent) ChildPodCIDRs(n *corev1.Node) ([]string, bool) {
	if !isChild(n, p.kids) {
		return nil, false
	}
	routed, _ := p.grants.routed(n.Name)
	return routed, true
}

// Ready is closed once the children present when Run started are decided
// (or ctx ended): the summaries this cluster reports up then carry their
// grants from the start.
func (p *Parent) Ready() <-chan struct{} { return p.ready }

// Run runs the controllers until ctx ends, once the node informer synced.
func (p *Parent) Run(ctx context.Context) {
	p.decorator.quotas = &childQuotas{quotas: p.quotas, recorder: kubeclient.NewRecorder(ctx, p.client, ""), warned: map[string]string{}}
	p.decorator.recorder = kubeclient.NewRecorder(ctx, p.client, "")
	var wg sync.WaitGroup
	wg.Go(func() { p.admin.Run(ctx) })
	wg.Go(func() { p.serviceCIDR.run(ctx) })
	wg.Go(func() { p.kids.run(ctx) })
	wg.Go(func() {
		defer close(p.ready)
		p.loadGrants(ctx)
	})
	wg.Go(func() { p.decorator.queue.Run(ctx, 1) })
	wg.Go(func() { p.approver.run(ctx) })
	wg.Go(func() { p.revoked.Run(ctx) })
	wg.Go(func() { p.quotas.Run(ctx) })
	if p.volumes != nil {
		wg.Go(func() { p.volumes.run(ctx, p.nodes.Lister()) })
	}
	wg.Wait()
}

// loadGrants waits for the admin's grants and this cluster's Service
// CIDRs, reads the children and their shares of the pool (again every few
// seconds until it can; meanwhile the decorator leaves the children's
// addresses alone), frees the shares of children gone while no agent ran,
// and decides every child here, the oldest first.
func (p *Parent) loadGrants(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), p.admin.HasSynced) {
		return
	}
	p.serviceCIDR.waitSynced(ctx)
	err := wait.PollUntilContextCancel(ctx, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := p.kids.load(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Children's pod CIDRs are not decided until their shares of the pool are read")
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return
	}
	nodes, _ := p.nodes.Lister().List(labels.Everything())
	here := map[string]bool{}
	for _, n := range nodes {
		here[n.Name] = true
	}
	for name := range p.kids.all() {
		if !here[name] {
			p.kids.free(name)
		}
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, n := range nodes {
		if isChild(n, p.kids) {
			claimed, sum := p.decorator.cidrs.of(n)
			_, _ = p.grants.decide(n.Name, podcidrs.Strings(claimed), p.decorator.coversSame(n, sum))
		}
	}
	p.decorator.enqueueAll()
}
