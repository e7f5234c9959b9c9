package parent

import (
	"context"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/provider/peers"
)

// ownAddresses returns what no child may be granted (grants.go): this
// cluster's own nodes' pod CIDRs and addresses (its real nodes: a virtual
// node's are its child's claim), its Service CIDRs, and its API address
// on the pod network.
func ownAddresses(nodes corelisters.NodeLister, services *serviceCIDRs, gw *peers.Peers) func() []reserved {
	return func() []reserved {
		var podCIDRs, addresses []netip.Prefix
		all, _ := nodes.List(labels.Everything())
		for _, n := range all {
			if n.Labels[api.LabelCluster] != "" {
				continue
			}
			cidrs := n.Spec.PodCIDRs
			if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
				cidrs = []string{n.Spec.PodCIDR}
			}
			podCIDRs = append(podCIDRs, podcidrs.Strings(cidrs)...)
			for _, a := range n.Status.Addresses {
				if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
					continue
				}
				if ip, err := netip.ParseAddr(a.Address); err == nil {
					addresses = append(addresses, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				}
			}
		}
		return []reserved{
			{what: "nodes' pod CIDRs", set: podcidrs.SetOf(podCIDRs)},
			{what: "node addresses", set: podcidrs.SetOf(addresses)},
			{what: "Service CIDRs", set: podcidrs.SetOf(services.prefixes())},
			{what: "API address on the pod network", set: podcidrs.SetOf(podcidrs.Strings(gw.APIPrefix()))},
		}
	}
}

// serviceCIDRs follows this cluster's Service CIDRs (networking.k8s.io/v1
// ServiceCIDR, served from Kubernetes 1.33).
type serviceCIDRs struct {
	informer cache.SharedIndexInformer
}

func newServiceCIDRs(client kubernetes.Interface) *serviceCIDRs {
	if client == nil {
		return &serviceCIDRs{}
	}
	return &serviceCIDRs{informer: informers.NewSharedInformerFactory(client, 0).Networking().V1().ServiceCIDRs().Informer()}
}

func (s *serviceCIDRs) run(ctx context.Context) {
	if s.informer != nil {
		s.informer.RunWithContext(ctx)
	}
}

// serviceCIDRPatience bounds how long the children's grants wait for the
// Service CIDRs: an API server that does not serve them (older than 1.33)
// would hold them forever.
const serviceCIDRPatience = 30 * time.Second

// waitSynced waits until the Service CIDRs are read, for
// serviceCIDRPatience at most.
func (s *serviceCIDRs) waitSynced(ctx context.Context) {
	if s.informer == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, serviceCIDRPatience)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), s.informer.HasSynced) && ctx.Err() == nil {
		klog.FromContext(ctx).Info("This cluster's Service CIDRs could not be read (an API server before 1.33, or no permission): children may be granted addresses in them")
	}
}

// prefixes returns the Service CIDRs read so far.
func (s *serviceCIDRs) prefixes() []netip.Prefix {
	if s == nil || s.informer == nil {
		return nil
	}
	var out []netip.Prefix
	for _, obj := range s.informer.GetStore().List() {
		if sc, ok := obj.(*networkingv1.ServiceCIDR); ok {
			out = append(out, podcidrs.Strings(sc.Spec.CIDRs)...)
		}
	}
	return out
}
