package child

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/virtual-kubelet/virtual-kubelet/node"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/provider/vnode"
)

// registrar registers a run's virtual node in the parent and runs
// virtual-kubelet's node controller over it (status, lease, a node deleted
// in the parent registered again), sparing the parent the requests that
// only repeat the registration (registration, below).
type registrar struct {
	client               kubernetes.Interface // the parent, as the node
	target               *v1alpha1.Target
	clusterUID           string
	leaseDurationSeconds int32
	shortcuts            *registration
}

func newRegistrar(client kubernetes.Interface, t *v1alpha1.Target, clusterUID string, leaseDurationSeconds int32, clk clock.PassiveClock) *registrar {
	return &registrar{client: client, target: t, clusterUID: clusterUID, leaseDurationSeconds: leaseDurationSeconds, shortcuts: &registration{clock: clk}}
}

// ownNode returns the virtual node of this Target in the parent, nil when
// there is none yet, and a NameTaken error when the node of that name
// belongs to another cluster.
func (g *registrar) ownNode(ctx context.Context) (*corev1.Node, error) {
	t := g.target
	existing, err := g.client.CoreV1().Nodes().Get(ctx, t.Spec.ClusterName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, join.Classify(err, t.Spec.ParentURL)
	case existing.Annotations[api.AnnotationClusterUID] != g.clusterUID:
		return nil, join.Errorf(v1alpha1.ReasonNameTaken, nil,
			"the parent already has a node named %q that is not this cluster's: choose another spec.clusterName, or delete that node in the parent if it is stale", t.Spec.ClusterName)
	}
	return existing, nil
}

// register creates the virtual node in the parent, or adopts existing (a
// node this cluster registered before), and returns the node as
// registered. The node is registered here, not by the node controller, so
// that it carries its summary from the start (the node controller never
// applies the summary: PatchSummary writes it).
func (g *registrar) register(ctx context.Context, prov *vnode.Provider, existing *corev1.Node) (*corev1.Node, error) {
	t := g.target
	nodes := g.client.CoreV1().Nodes()
	initial, err := prov.InitialNode()
	if err != nil {
		return nil, err
	}
	if existing == nil {
		var created *corev1.Node
		err = retry.OnError(endpointRetry, refusedEndpoint, func() error {
			var cerr error
			created, cerr = nodes.Create(ctx, withTTL(initial), metav1.CreateOptions{FieldManager: api.FieldManager})
			return cerr
		})
		if err == nil {
			g.shortcuts.created(created)
		}
		if apierrors.IsAlreadyExists(err) {
			// Ours from before (adopted), or another cluster's.
			if existing, err = g.ownNode(ctx); err != nil {
				return nil, err
			}
		}
	}
	if existing != nil {
		var patch []byte
		if patch, err = prov.AdoptPatch(existing, initial); err == nil {
			_, err = nodes.Patch(ctx, t.Spec.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManager})
		}
	}
	if err != nil {
		return nil, nodeError(err, t)
	}
	return initial, nil
}

// endpointRetry paces the creation of a node refused by the parent's
// policy nestlet-children-kubelet (refusedEndpoint): about 3 s in all.
var endpointRetry = wait.Backoff{Steps: 7, Duration: 50 * time.Millisecond, Factor: 2}

// refusedEndpoint reports whether err is the parent's policy refusing the
// node's kubelet endpoint. That policy reads the node port the parent's
// proxy just recorded for this node from the API server's cache, which may
// not have it yet when the node is created right after the proxy answered:
// the creation is then tried again, shortly. A refusal that stays (an
// endpoint the parent does not allow) ends the registration with the
// policy's message.
func refusedEndpoint(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "nestlet-children-kubelet")
}

// withTTL returns n with the object TTL annotation that the parent's TTL
// controller sets on every node of a cluster of up to 100 nodes (a parent
// of clusters usually is one): "0". It tells a kubelet how long it may
// cache the Secrets and ConfigMaps of its pods, and a virtual node caches
// none, so the value is harmless; created with it, the node saves the
// parent the controller's write. In a bigger parent the controller sets
// its own value, as before. It is not in what the node controller applies
// (n's last-applied annotations), so nothing ever puts "0" back.
func withTTL(n *corev1.Node) *corev1.Node {
	out := n.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	if _, ok := out.Annotations[corev1.ObjectTTLAnnotationKey]; !ok {
		out.Annotations[corev1.ObjectTTLAnnotationKey] = "0"
	}
	return out
}

// statusRefresh is how often the node's status is posted when nothing
// changed.
const statusRefresh = 5 * time.Minute

// pingInterval is how often the node controller checks this cluster's
// readiness (Ping; one check serves every Target for a second). The lease
// is renewed only after a good ping, so after this cluster's API server
// comes back the lease waits for the next ping: virtual-kubelet's 10 s
// made a 25 s restart of the API server look, to the parent, like a node
// lost for its whole 40 s grace period.
const pingInterval = 2 * time.Second

// newNodeController returns virtual-kubelet's node controller for the
// registered node: status and lease, and a node deleted in the parent
// registered again.
func (g *registrar) nodeController(prov *vnode.Provider, initial *corev1.Node) (*node.NodeController, error) {
	nodes := g.client.CoreV1().Nodes()
	return node.NewNodeController(prov, prov.ControllerNode(initial), nodesClient{NodeInterface: nodes, r: g.shortcuts},
		node.WithNodeEnableLeaseV1(leasesClient{LeaseInterface: g.client.CoordinationV1().Leases(corev1.NamespaceNodeLease), r: g.shortcuts}, g.leaseDurationSeconds),
		// The lease carries liveness, and every change of the node is
		// posted when it happens (and a status the parent marked unknown,
		// watchOwnNode): the full status is refreshed every 5 minutes, as
		// a kubelet's (nodeStatusReportFrequency), not every minute.
		node.WithNodeStatusUpdateInterval(statusRefresh),
		node.WithNodePingInterval(pingInterval),
		node.WithNodeStatusUpdateErrorHandler(func(ctx context.Context, err error) error {
			if !apierrors.IsNotFound(err) {
				return err
			}
			// Someone deleted the node in the parent: register it again.
			n, berr := prov.InitialNode()
			if berr != nil {
				return berr
			}
			_, cerr := nodes.Create(ctx, n, metav1.CreateOptions{FieldManager: api.FieldManager})
			return cerr
		}),
	)
}

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
	// latest is the newest version of the node known: from the watch of
	// it (watchOwnNode, observe) or the answer to the last status post.
	latest *corev1.Node
}

// observe keeps n if it is newer than the version known.
func (r *registration) observe(n *corev1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.latest == nil || r.latest.Name != n.Name || !olderVersion(n.ResourceVersion, r.latest.ResourceVersion) {
		r.latest = n.DeepCopy()
	}
}

// olderVersion reports whether resource version a is before b. Versions
// are etcd's revisions, which only grow; where one is not a number
// (another storage), neither is older: the latest seen is kept.
func olderVersion(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x < y
}

// forget drops the known version of the node (deleted in the parent).
func (r *registration) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latest = nil
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

// Get answers the node controller's read before each status post (it
// computes the post from the node as the parent has it) from the node as
// last seen, by the watch of it or the answer to the last post, when there
// is one: a read of the parent's storage per post and child saved. Only
// before the watch has seen the node is the parent asked.
func (c nodesClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	c.r.mu.Lock()
	if c.r.fresh(name) && !c.r.got {
		c.r.got = true
		n := c.r.node.DeepCopy()
		c.r.mu.Unlock()
		return n, nil
	}
	if l := c.r.latest; l != nil && l.Name == name && opts.ResourceVersion == "" {
		n := l.DeepCopy()
		c.r.mu.Unlock()
		return n, nil
	}
	c.r.mu.Unlock()
	n, err := c.NodeInterface.Get(ctx, name, opts)
	if err == nil {
		c.r.observe(n)
	}
	return n, err
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
	n, err := c.NodeInterface.Patch(ctx, name, pt, data, opts, subresources...)
	switch {
	case err == nil:
		c.r.observe(n)
	case apierrors.IsNotFound(err):
		c.r.forget()
	}
	return n, err
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
