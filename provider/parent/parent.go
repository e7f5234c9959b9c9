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
	"sync"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/pkg/kubeclient"
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
	// Peers, when this cluster runs a gateway, are told each child's key
	// and routes (optional).
	Peers *peers.Peers
	Clock clock.PassiveClock
}

// Parent runs the controllers of the parent's side.
type Parent struct {
	client    kubernetes.Interface
	nodes     coreinformers.NodeInformer
	decorator *decorator
	approver  *approver
	revoked   *revoked.Watcher
	quotas    *quota.Watcher
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
	p := &Parent{client: cfg.Client, nodes: cfg.Nodes, decorator: dc, quotas: quota.New(cfg.Client)}
	p.revoked = revoked.New(cfg.Client, func(map[string]bool) { dc.enqueueAll() })
	dc.revoked = p.revoked
	if p.approver, err = newApprover(cfg.Client, p.revoked, cfg.Nodes.Lister()); err != nil {
		return nil, err
	}
	return p, nil
}

// Run runs the controllers until ctx ends, once the node informer synced.
func (p *Parent) Run(ctx context.Context) {
	p.decorator.quotas = &childQuotas{quotas: p.quotas, recorder: kubeclient.NewRecorder(ctx, p.client, ""), warned: map[string]string{}}
	var wg sync.WaitGroup
	wg.Go(func() { p.decorator.queue.Run(ctx, 1) })
	wg.Go(func() { p.approver.run(ctx) })
	wg.Go(func() { p.revoked.Run(ctx) })
	wg.Go(func() { p.quotas.Run(ctx) })
	wg.Go(func() { runVolumes(ctx, p.client, p.nodes.Lister()) })
	wg.Wait()
}
