package agent

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/virtual-kubelet/virtual-kubelet/node"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
	"github.com/nestlet/nestlet/provider/vnode"
)

// ownNode returns the virtual node of this Target in the parent, nil when
// there is none yet, and a NameTaken error when the node of that name
// belongs to another cluster.
func (r *runner) ownNode(ctx context.Context, nodeClient kubernetes.Interface) (*corev1.Node, error) {
	t := r.target
	existing, err := nodeClient.CoreV1().Nodes().Get(ctx, t.Spec.ClusterName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, join.Classify(err, t.Spec.ParentURL)
	case existing.Annotations[api.AnnotationClusterUID] != r.a.clusterUID:
		return nil, join.Errorf(v1alpha1.ReasonNameTaken, nil,
			"the parent already has a node named %q that is not this cluster's: choose another spec.clusterName, or delete that node in the parent if it is stale", t.Spec.ClusterName)
	}
	return existing, nil
}

// newProvider returns the virtual node's provider: its summary from this
// cluster's nodes and pods, reported to the parent with the node identity.
func (r *runner) newProvider(ctx context.Context, id *join.Identity, nodeClient kubernetes.Interface, kubeletEndpoint func() (string, int32), changed <-chan struct{}) (*vnode.Provider, error) {
	t := r.target
	nodes := nodeClient.CoreV1().Nodes()
	return vnode.New(vnode.Config{
		ClusterName:  t.Spec.ClusterName,
		ClusterUID:   r.a.clusterUID,
		ParentName:   parentName(id, t),
		GroupKeys:    r.a.cfg.GroupKeys,
		SharePercent: r.sharePercent,
		Parents:      func() int { return len(r.a.targetLister.ListKeys()) },
		Reconnected: func(time.Duration) {
			select {
			case r.reconnected <- struct{}{}:
			default:
			}
		},
		Labels:          t.Spec.Labels,
		Taints:          t.Spec.Taints,
		ReportFrequency: reportFrequency(t),
		Nodes:           r.a.nodes,
		Pods:            r.a.pods,
		Changed:         changed,
		Ready:           r.a.ready,
		Reported:        func(at time.Time) { r.reported(ctx, at) },
		KubeletEndpoint: kubeletEndpoint,
		PatchSummary: func(ctx context.Context, sum string) error {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationSummary: sum}}})
			if err != nil {
				return err
			}
			_, err = nodes.Patch(ctx, t.Spec.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
			return err
		},
		Clock: r.a.cfg.Clock,
	})
}

// register creates the virtual node in the parent, or adopts existing (a
// node this cluster registered before), and returns the node as
// registered. The node is registered here, not by the node controller, so
// that it carries its summary from the start (the node controller never
// applies the summary: PatchSummary writes it).
func (r *runner) register(ctx context.Context, nodeClient kubernetes.Interface, prov *vnode.Provider, existing *corev1.Node, reg *registration) (*corev1.Node, error) {
	t := r.target
	nodes := nodeClient.CoreV1().Nodes()
	initial, err := prov.InitialNode()
	if err != nil {
		return nil, err
	}
	if existing == nil {
		var created *corev1.Node
		created, err = nodes.Create(ctx, withTTL(initial), metav1.CreateOptions{FieldManager: fieldManager})
		if err == nil {
			reg.created(created)
		}
		if apierrors.IsAlreadyExists(err) {
			// Ours from before (adopted), or another cluster's.
			if existing, err = r.ownNode(ctx, nodeClient); err != nil {
				return nil, err
			}
		}
	}
	if existing != nil {
		var patch []byte
		if patch, err = prov.AdoptPatch(existing, initial); err == nil {
			_, err = nodes.Patch(ctx, t.Spec.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		}
	}
	if err != nil {
		return nil, nodeError(err, t)
	}
	return initial, nil
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
func (r *runner) newNodeController(nodeClient kubernetes.Interface, prov *vnode.Provider, initial *corev1.Node, reg *registration) (*node.NodeController, error) {
	nodes := nodeClient.CoreV1().Nodes()
	return node.NewNodeController(prov, prov.ControllerNode(initial), nodesClient{NodeInterface: nodes, r: reg},
		node.WithNodeEnableLeaseV1(leasesClient{LeaseInterface: nodeClient.CoordinationV1().Leases(corev1.NamespaceNodeLease), r: reg}, r.a.cfg.LeaseDurationSeconds),
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
			_, cerr := nodes.Create(ctx, n, metav1.CreateOptions{FieldManager: fieldManager})
			return cerr
		}),
	)
}

// sharePercent is the share of this cluster's free capacity offered to
// the Target's parent: spec.capacityPercent, or an even split between this
// cluster's Targets, so that ancestors common to several parents count it
// once.
func (r *runner) sharePercent() int {
	if p := r.target.Spec.CapacityPercent; p != nil {
		return int(*p)
	}
	n := len(r.a.targetLister.ListKeys())
	if n <= 1 {
		return 100
	}
	return max(1, 100/n)
}
