package noderoutes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/permissions"
)

// Options configure Run.
type Options struct {
	// Namespace holds the ConfigMap (the agent's).
	Namespace string
	// NodeName is this node's name.
	NodeName string
	// Resync is how often the interface and routes are set again even
	// without a change (someone else removed them); 30s when 0.
	Resync time.Duration
	// DaemonSet names the DaemonSet (in Namespace) this route agent is a
	// pod of. On exit the node keeps its interface, routes and table while
	// that DaemonSet exists, is not being deleted and would run a pod on
	// this node again: a rolling update or a deleted pod, whose successor
	// on the node takes them over without a gap in the node's traffic to
	// the tree. Once the DaemonSet is gone or going (helm uninstall, node
	// routes turned off), no longer selects the node (its labels or taints
	// changed), or either cannot be read, they are removed. Empty: always
	// removed.
	DaemonSet string
	// AnySource accepts VXLAN packets from any address; by default only
	// from the cluster's nodes' (Plan.Peers).
	AnySource bool
}

// Permissions are what the route agent does in its cluster; the chart
// grants exactly these (charts/nestlet/templates/routes.yaml).
var Permissions = []permissions.Rule{
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{ConfigMapName},
		Verbs: []string{"get", "list", "watch"},
		Why:   "the node the gateway runs on and the CIDRs it routes to its peers, published by the working agent"},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"},
		Why: "the gateway's node's address, the VXLAN's remote end; every node's addresses, the only sources VXLAN is accepted from; on exit, its own node's labels and taints (whether its DaemonSet runs a pod there again)"},
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{DaemonSetNamePlaceholder},
		Verbs: []string{"get"},
		Why:   "on exit, whether its own DaemonSet still exists: the node keeps its routes for the next route agent, unless the DaemonSet is gone (uninstall)"},
}

// DaemonSetNamePlaceholder in Permissions is the route agents' DaemonSet,
// the release's "<fullname>-routes".
const DaemonSetNamePlaceholder = "<fullname>-routes"

// Run keeps a's namespace configured to what the gateway publishes until
// ctx ends, then removes the interface and table, or leaves them to the
// next route agent (Options.DaemonSet).
func Run(ctx context.Context, client kubernetes.Interface, a *Applier, o Options) error {
	if o.NodeName == "" {
		return fmt.Errorf("the node's name is needed (--node-name, or NODE_NAME from the downward API)")
	}
	if o.Resync == 0 {
		o.Resync = 30 * time.Second
	}
	logger := klog.FromContext(ctx)
	// No informer resync: the ticker below is the one periodic pass.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", ConfigMapName).String()
		}))
	cms := factory.Core().V1().ConfigMaps()
	kick := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := cms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notify,
		UpdateFunc: func(_, n any) { notify(n) }, DeleteFunc: notify}); err != nil {
		return err
	}
	// Only the nodes' addresses are read: the cache keeps no more of them
	// (their images and managed fields are most of a Node).
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(addressesOnly))
	nodes := nodeFactory.Core().V1().Nodes()
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notify, DeleteFunc: notify,
		UpdateFunc: func(o, n any) {
			if !slices.Equal(NodeAddresses([]*corev1.Node{o.(*corev1.Node)}), NodeAddresses([]*corev1.Node{n.(*corev1.Node)})) {
				notify(n)
			}
		}}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer nodeFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), cms.Informer().HasSynced, nodes.Informer().HasSynced) {
		return ctx.Err()
	}
	node := nodes.Lister().Get
	var last Plan
	var lastErr string
	tick := time.NewTicker(o.Resync)
	defer tick.Stop()
	for {
		cm, err := cms.Lister().ConfigMaps(o.Namespace).Get(ConfigMapName)
		if apierrors.IsNotFound(err) {
			cm, err = nil, nil
		}
		var warnings []string
		var p Plan
		if err == nil {
			if p, err = PlanFor(cm, o.NodeName, node); err == nil {
				if p.Peers, err = peers(nodes.Lister().List, o.AnySource); err == nil {
					warnings, err = a.Apply(p)
				}
			}
		}
		switch {
		case err != nil:
			if err.Error() != lastErr {
				logger.Error(err, "Routing this node's pods to the gateway", "node", o.NodeName)
			}
			lastErr = err.Error()
		case !samePlan(p, last) || lastErr != "":
			kv := []any{"role", p.Role, "gatewayNode", p.GatewayNode, "routes", p.Routes, "vxlanFrom", peersText(p.Peers)}
			if p.Gateway.IsValid() { // the gateway node's address, where this node sends
				kv = append(kv, "gateway", p.Gateway)
			}
			logger.Info("Routes to the gateway set", kv...)
			for _, w := range warnings {
				logger.Info("WARNING: " + w)
			}
			last, lastErr = p, ""
		}
		select {
		case <-ctx.Done():
			keep, why := handOver(client, o)
			if keep {
				logger.Info("Leaving the interface, routes and table to the next route agent on this node", "interface", Device, "why", why)
				return nil
			}
			if err := a.Remove(); err != nil {
				return fmt.Errorf("removing %s: %w", Device, err)
			}
			logger.Info("Removed the routes to the gateway", "interface", Device, "why", why)
			return nil
		case <-kick:
		case <-tick.C:
		}
	}
}

// addressesOnly is the node informer's transform: a Node with its name and
// addresses only, and a child cluster's virtual node without its
// addresses, which are the child's to write: no VXLAN is accepted from
// them.
func addressesOnly(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: n.Namespace, ResourceVersion: n.ResourceVersion, UID: n.UID}}
		if !virtual(n) {
			out.Status.Addresses = n.Status.Addresses
		}
		return out, nil
	}
	return obj, nil
}

// virtual reports whether n is a child cluster's virtual node: it says so,
// or it has the provider taint, which a node cannot take off itself.
func virtual(n *corev1.Node) bool {
	if n.Labels[api.LabelCluster] != "" || n.Labels[api.LabelNodeType] == api.NodeTypeVirtualKubelet {
		return true
	}
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == api.TaintKeyProvider })
}

// handOver tells whether a route agent that exits leaves the node as it is
// for its successor, and why (or why not): while its DaemonSet
// (Options.DaemonSet) exists, is not being deleted and would run a pod on
// this node again (daemonRunsOn). Not when it is gone or going, when it no
// longer selects this node (a label or taint changed: no successor would
// come to remove what is left), or when either cannot be read: an
// uninstall deletes the route agent's Role and ServiceAccount too, and an
// agent that could not tell must not leave routes behind.
func handOver(client kubernetes.Interface, o Options) (bool, string) {
	if o.DaemonSet == "" {
		return false, "not run by a DaemonSet"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := client.AppsV1().DaemonSets(o.Namespace).Get(ctx, o.DaemonSet, metav1.GetOptions{})
	switch {
	case err != nil:
		return false, fmt.Sprintf("DaemonSet %s/%s: %v", o.Namespace, o.DaemonSet, err)
	case ds.DeletionTimestamp != nil:
		return false, fmt.Sprintf("DaemonSet %s/%s is being deleted", o.Namespace, o.DaemonSet)
	}
	// The route agent may list nodes (their addresses), not get them.
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", o.NodeName).String()})
	switch {
	case err != nil:
		return false, fmt.Sprintf("node %s: %v", o.NodeName, err)
	case len(nodes.Items) == 0:
		return false, fmt.Sprintf("node %s is gone", o.NodeName)
	}
	if ok, why := daemonRunsOn(ds, &nodes.Items[0]); !ok {
		return false, fmt.Sprintf("DaemonSet %s/%s runs no pod on node %s any more: %s", o.Namespace, o.DaemonSet, o.NodeName, why)
	}
	return true, fmt.Sprintf("DaemonSet %s/%s still exists: its next pod on this node takes them over", o.Namespace, o.DaemonSet)
}

// daemonTolerations are the tolerations the DaemonSet controller adds to
// every pod it makes (k8s.io/kubernetes/pkg/controller/daemon/util's
// AddOrUpdateDaemonPodTolerations), the last one for pods on the host's
// network only: a cordoned node or one under pressure keeps its daemons.
func daemonTolerations(hostNetwork bool) []corev1.Toleration {
	out := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if hostNetwork {
		out = append(out, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

// daemonRunsOn tells whether the DaemonSet controller would run a pod of
// ds on node, as it decides it: the pod template's node selector and
// required node affinity match the node, and every NoSchedule or
// NoExecute taint of the node is tolerated (with daemonTolerations); if
// not, why.
func daemonRunsOn(ds *appsv1.DaemonSet, node *corev1.Node) (bool, string) {
	spec := ds.Spec.Template.Spec
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec}).Match(node); err != nil || !ok {
		return false, "its node selector or node affinity does not match the node's labels"
	}
	tolerations := append(slices.Clone(spec.Tolerations), daemonTolerations(spec.HostNetwork)...)
	taint, untolerated := schedulingcorev1.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	if untolerated {
		return false, fmt.Sprintf("it does not tolerate the node's taint %s", taint.ToString())
	}
	return true, ""
}

func peersText(p []netip.Addr) string {
	if p == nil {
		return "any address"
	}
	return fmt.Sprint(p)
}

// peers are the addresses VXLAN is accepted from: every node's, nil with
// anySource.
func peers(list func(labels.Selector) ([]*corev1.Node, error), anySource bool) ([]netip.Addr, error) {
	if anySource {
		return nil, nil
	}
	all, err := list(labels.Everything())
	if err != nil {
		return nil, err
	}
	return NodeAddresses(all), nil
}

func samePlan(a, b Plan) bool {
	return a.Role == b.Role && a.GatewayNode == b.GatewayNode && a.Gateway == b.Gateway && slices.Equal(a.Routes, b.Routes) &&
		slices.Equal(a.Peers, b.Peers)
}
