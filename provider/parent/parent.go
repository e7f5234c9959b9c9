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
	"net/netip"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

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
	// Namespace is the agent's, where the children's shares of the pod
	// CIDR pool are kept (api.PodCIDRAllocationsConfigMap).
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
	Clock clock.PassiveClock
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
	serviceCIDR *serviceCIDRs
}

// New builds the controllers and registers their handlers on cfg.Nodes:
// call it before the informer starts.
func New(cfg Config) (*Parent, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	dc, err := newDecorator(cfg.Client, cfg.Nodes, cfg.Clock, cfg.Peers)
	if err != nil {
		return nil, err
	}
	p := &Parent{client: cfg.Client, nodes: cfg.Nodes, decorator: dc, quotas: quota.New(cfg.Client),
		admin: podcidrs.NewGrants(cfg.Client, dc.enqueueAll), serviceCIDR: newServiceCIDRs(cfg.Client)}
	p.grants = newGrants(p.admin, cfg.PodCIDRPool, cfg.PodCIDRPoolShareBits, newAllocations(cfg.Client, cfg.Namespace),
		ownAddresses(cfg.Nodes.Lister(), p.serviceCIDR, cfg.Peers))
	dc.grants = p.grants
	p.revoked = revoked.New(cfg.Client, func(map[string]bool) { dc.enqueueAll() })
	dc.revoked = p.revoked
	if p.approver, err = newApprover(cfg.Client, p.revoked, cfg.Nodes.Lister()); err != nil {
		return nil, err
	}
	return p, nil
}

// RoutedPodCIDRs returns the pod CIDRs this cluster grants child name (its
// virtual node), and false while they are not decided yet: what this
// cluster's own summary carries up of that child.
func (p *Parent) RoutedPodCIDRs(name string) ([]string, bool) { return p.grants.routed(name) }

// Run runs the controllers until ctx ends, once the node informer synced.
// Children are decorated once the grants and the pool's shares are read.
func (p *Parent) Run(ctx context.Context) {
	p.decorator.quotas = &childQuotas{quotas: p.quotas, recorder: kubeclient.NewRecorder(ctx, p.client, ""), warned: map[string]string{}}
	p.decorator.recorder = kubeclient.NewRecorder(ctx, p.client, "")
	var wg sync.WaitGroup
	wg.Go(func() { p.admin.Run(ctx) })
	wg.Go(func() { p.serviceCIDR.run(ctx) })
	wg.Go(func() {
		if !p.loadGrants(ctx) {
			p.decorator.queue.ShutDown()
			return
		}
		p.decorator.queue.Run(ctx, 1)
	})
	wg.Go(func() { p.approver.run(ctx) })
	wg.Go(func() { p.revoked.Run(ctx) })
	wg.Go(func() { p.quotas.Run(ctx) })
	wg.Go(func() { runVolumes(ctx, p.client, p.nodes.Lister()) })
	wg.Wait()
}

// loadGrants waits for the admin's grants and this cluster's Service
// CIDRs, and reads the children's shares of the pool (again every few
// seconds until it can), keeping those of children still here; false
// when ctx ended first.
func (p *Parent) loadGrants(ctx context.Context) bool {
	if !cache.WaitForCacheSync(ctx.Done(), p.admin.HasSynced) {
		return false
	}
	p.serviceCIDR.waitSynced(ctx)
	exists := func(child string) bool {
		_, err := p.nodes.Lister().Get(child)
		return err == nil
	}
	err := wait.PollUntilContextCancel(ctx, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := p.grants.held.load(ctx, exists); err != nil {
			klog.FromContext(ctx).Error(err, "Children's pod CIDRs are not decided until the pool's shares are read")
			return false, nil
		}
		return true, nil
	})
	return err == nil
}
