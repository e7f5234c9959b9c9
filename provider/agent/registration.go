package agent

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
)

// freshWindow is how long after registering its node the agent answers
// the node controller's first requests itself.
const freshWindow = 10 * time.Second

// registration spares virtual-kubelet's node controller the requests it
// makes as it starts that only repeat what registering the node has just
// done: reading the node back and posting the status it was created with
// (ensureNode), looking for a lease that cannot exist for a node just
// created, and renewing the lease moments after creating it (its lease
// controller syncs twice in a row at start). Each is answered once, within
// freshWindow of the node's creation; everything else goes to the parent.
// A node adopted from an earlier run is not fresh: nothing is answered.
type registration struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	// node as created, and when; nil when not fresh.
	node    *corev1.Node
	at      time.Time
	got     bool // the node was read back once
	patched bool // its status was posted once
	looked  bool // the lease was looked for once
	lease   *coordinationv1.Lease
	leaseAt time.Time
	renewed bool
}

func (r *registration) created(n *corev1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.node, r.at = n, r.clock.Now()
}

// fresh reports whether the node named name was created within the window.
func (r *registration) fresh(name string) bool {
	return r.node != nil && r.node.Name == name && r.clock.Since(r.at) < freshWindow
}

// nodesClient is the node client the node controller gets.
type nodesClient struct {
	coreclient.NodeInterface
	r *registration
}

func (c nodesClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	c.r.mu.Lock()
	if c.r.fresh(name) && !c.r.got {
		c.r.got = true
		n := c.r.node.DeepCopy()
		c.r.mu.Unlock()
		return n, nil
	}
	c.r.mu.Unlock()
	return c.NodeInterface.Get(ctx, name, opts)
}

func (c nodesClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	if len(subresources) == 1 && subresources[0] == "status" {
		c.r.mu.Lock()
		if c.r.fresh(name) && c.r.got && !c.r.patched {
			// The status of the node just created, read back from it.
			c.r.patched = true
			n := c.r.node.DeepCopy()
			c.r.mu.Unlock()
			return n, nil
		}
		c.r.mu.Unlock()
	}
	return c.NodeInterface.Patch(ctx, name, pt, data, opts, subresources...)
}

// leasesClient is the lease client the node controller gets.
type leasesClient struct {
	coordclient.LeaseInterface
	r *registration
}

func (c leasesClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	c.r.mu.Lock()
	if c.r.fresh(name) && !c.r.looked {
		c.r.looked = true
		c.r.mu.Unlock()
		// A node's lease is owned by the node: none outlives an earlier
		// node of that name. Were there one, Create says so and the
		// controller reads it.
		return nil, apierrors.NewNotFound(coordinationv1.Resource("leases"), name)
	}
	c.r.mu.Unlock()
	return c.LeaseInterface.Get(ctx, name, opts)
}

func (c leasesClient) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out, err := c.LeaseInterface.Create(ctx, lease, opts)
	if err == nil {
		c.r.mu.Lock()
		c.r.lease, c.r.leaseAt = out.DeepCopy(), c.r.clock.Now()
		c.r.mu.Unlock()
	}
	return out, err
}

func (c leasesClient) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	c.r.mu.Lock()
	if l := c.r.lease; l != nil && l.Name == lease.Name && !c.r.renewed && c.r.clock.Since(c.r.leaseAt) < time.Second {
		// Renewed moments after it was created: as created.
		c.r.renewed = true
		out := l.DeepCopy()
		c.r.mu.Unlock()
		return out, nil
	}
	c.r.mu.Unlock()
	return c.LeaseInterface.Update(ctx, lease, opts)
}
