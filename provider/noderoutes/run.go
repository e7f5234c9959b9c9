package noderoutes

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

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
}

// Permissions are what the route agent does in its cluster; the chart
// grants exactly these (charts/nestlet/templates/routes.yaml).
var Permissions = []permissions.Rule{
	{Namespace: permissions.ReleaseNamespace, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{ConfigMapName},
		Verbs: []string{"get", "list", "watch"},
		Why:   "the node the gateway runs on and the CIDRs it routes into the tunnels, published by the working agent"},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"},
		Why: "the gateway's node's address, the VXLAN's remote end"},
}

// Run keeps a's namespace configured to what the gateway publishes until
// ctx ends, then removes the interface.
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
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), cms.Informer().HasSynced) {
		return ctx.Err()
	}
	node := func(name string) (*corev1.Node, error) {
		return client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
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
				warnings, err = a.Apply(p)
			}
		}
		switch {
		case err != nil:
			if err.Error() != lastErr {
				logger.Error(err, "Routing this node's pods to the gateway", "node", o.NodeName)
			}
			lastErr = err.Error()
		case !samePlan(p, last) || lastErr != "":
			logger.Info("Routes to the gateway set", "role", p.Role, "gatewayNode", p.GatewayNode, "gateway", p.Gateway, "routes", p.Routes)
			for _, w := range warnings {
				logger.Info("WARNING: " + w)
			}
			last, lastErr = p, ""
		}
		select {
		case <-ctx.Done():
			if err := a.Remove(); err != nil {
				return fmt.Errorf("removing %s: %w", Device, err)
			}
			logger.Info("Removed the routes to the gateway", "interface", Device)
			return nil
		case <-kick:
		case <-tick.C:
		}
	}
}

func samePlan(a, b Plan) bool {
	return a.Role == b.Role && a.GatewayNode == b.GatewayNode && a.Gateway == b.Gateway && slices.Equal(a.Routes, b.Routes)
}
