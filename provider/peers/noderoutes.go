package peers

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/noderoutes"
)

// nodeRoutes publishes the gateway's node and the CIDRs it routes to the
// peers in the ConfigMap noderoutes.ConfigMapName, which the route agents
// of the cluster's other nodes (cmd/nestlet-routes) read to send those
// CIDRs to the gateway's node. Only the working agent runs a gateway, so
// only it writes; a newly elected one on another node writes its own node.
// The chart makes the ConfigMap, so that it goes with the release, and the
// agent only fills it in: one it made would outlive an uninstall, or stand
// in the way of the chart that makes it.
type nodeRoutes struct {
	client    kubernetes.Interface
	namespace string
	node      string

	mu     sync.Mutex
	routes []netip.Prefix
	kick   chan struct{}
}

// PublishRoutes publishes, until ctx ends, this gateway's node and the
// CIDRs routed to the peers (nodeRoutes), for the route agents of the
// cluster's other nodes. Called once, before any peer is set.
func (t *Peers) PublishRoutes(ctx context.Context, client kubernetes.Interface, namespace, node string) {
	nr := newNodeRoutes(client, namespace, node)
	t.mu.Lock()
	t.routed = nr.set
	t.mu.Unlock()
	nr.set(nil)
	go nr.run(ctx)
}

func newNodeRoutes(client kubernetes.Interface, namespace, node string) *nodeRoutes {
	return &nodeRoutes{client: client, namespace: namespace, node: node, kick: make(chan struct{}, 1)}
}

// set is Peers.routed: the latest routes, written by run.
func (n *nodeRoutes) set(routes []netip.Prefix) {
	n.mu.Lock()
	n.routes = routes
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// run writes the ConfigMap at start and after each change until ctx ends,
// again after a failed write.
func (n *nodeRoutes) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var last string // the last error logged, not again while it lasts
	for {
		n.mu.Lock()
		data := noderoutes.Data(n.node, n.routes)
		n.mu.Unlock()
		retry := time.Duration(0)
		if err := n.write(ctx, data); err != nil {
			if err.Error() != last {
				logger.Error(err, "Publishing the gateway's node for the route agents", "configMap", n.namespace+"/"+noderoutes.ConfigMapName)
			}
			last, retry = err.Error(), 2*time.Second
		} else {
			last = ""
		}
		if retry > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
	}
}

// write fills in the ConfigMap with data (the chart makes it).
func (n *nodeRoutes) write(ctx context.Context, data map[string]string) error {
	cms := n.client.CoreV1().ConfigMaps(n.namespace)
	cm, err := cms.Get(ctx, noderoutes.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("ConfigMap %s/%s is missing: the chart makes it with agent.gateway.enabled; without the chart, "+
			"create it (kubectl -n %s create configmap %s) or drop --gateway-node-name", n.namespace, noderoutes.ConfigMapName,
			n.namespace, noderoutes.ConfigMapName)
	}
	if err != nil || maps.Equal(cm.Data, data) {
		return err
	}
	cm.Data = data
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: api.FieldManager})
	return err
}

// sortedPrefixes are the keys of set, in order.
func sortedPrefixes(set map[netip.Prefix]bool) []netip.Prefix {
	out := slices.Collect(maps.Keys(set))
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out
}
