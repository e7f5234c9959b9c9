package parent

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/pkg/podcidrs"
	"github.com/nestlet/nestlet/provider/peers"
)

// ownAddresses returns what no child may be granted (grants.go): this
// cluster's own nodes' pod CIDRs and addresses (its real nodes: a child's
// node's are its claim), its Service CIDRs, its API address on the pod
// network, and those its parents' gateways relay.
func ownAddresses(nodes corelisters.NodeLister, kids *children, services *serviceCIDRs, gw *peers.Peers) func() []reserved {
	return func() []reserved {
		var podCIDRs, addresses []netip.Prefix
		all, _ := nodes.List(labels.Everything())
		for _, n := range all {
			if isChild(n, kids) {
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
			{what: "parents' API addresses on the pod network", set: podcidrs.SetOf(gw.ParentAPIPrefixes())},
		}
	}
}

// serviceCIDRs follows this cluster's Service CIDRs (networking.k8s.io/v1
// ServiceCIDR, served from Kubernetes 1.33).
type serviceCIDRs struct {
	client   kubernetes.Interface
	informer atomic.Pointer[cache.SharedIndexInformer]
	// started is closed once run knows whether they are served (and,
	// when they are, has started the informer).
	started chan struct{}
}

func newServiceCIDRs(client kubernetes.Interface) *serviceCIDRs {
	s := &serviceCIDRs{client: client, started: make(chan struct{})}
	if client == nil {
		close(s.started)
	}
	return s
}

// run follows the Service CIDRs until ctx ends, where the API server
// serves them.
func (s *serviceCIDRs) run(ctx context.Context) {
	if s.client == nil {
		return
	}
	resources, err := s.client.Discovery().ServerResourcesForGroupVersion(networkingv1.SchemeGroupVersion.String())
	served := err == nil && slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "servicecidrs" })
	if !served {
		klog.FromContext(ctx).Info("This cluster's API server serves no ServiceCIDRs (before Kubernetes 1.33): children may be granted addresses in its Service CIDRs", "err", err)
		close(s.started)
		return
	}
	inf := informers.NewSharedInformerFactory(s.client, 0).Networking().V1().ServiceCIDRs().Informer()
	s.informer.Store(&inf)
	close(s.started)
	inf.RunWithContext(ctx)
}

// serviceCIDRPatience bounds how long the children's grants wait for the
// Service CIDRs to be read.
const serviceCIDRPatience = 30 * time.Second

// waitSynced waits until the Service CIDRs are read, for
// serviceCIDRPatience at most.
func (s *serviceCIDRs) waitSynced(ctx context.Context) {
	select {
	case <-s.started:
	case <-ctx.Done():
		return
	}
	inf := s.informer.Load()
	if inf == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, serviceCIDRPatience)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), (*inf).HasSynced) && ctx.Err() == nil {
		klog.FromContext(ctx).Info("This cluster's Service CIDRs could not be read (no permission?): children may be granted addresses in them")
	}
}

// prefixes returns the Service CIDRs read so far.
func (s *serviceCIDRs) prefixes() []netip.Prefix {
	if s == nil {
		return nil
	}
	inf := s.informer.Load()
	if inf == nil {
		return nil
	}
	var out []netip.Prefix
	for _, obj := range (*inf).GetStore().List() {
		if sc, ok := obj.(*networkingv1.ServiceCIDR); ok {
			out = append(out, podcidrs.Strings(sc.Spec.CIDRs)...)
		}
	}
	return out
}
