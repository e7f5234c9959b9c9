package forward

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// The remote slices of a Service reflected into east: every endpoint of
// the parent's Service but those on east's virtual node (east's own
// controller publishes them), from the parent's own slices and from the
// remote slices it got from above, grouped by ports.
func TestRemoteEndpointsWanted(t *testing.T) {
	r := &remoteEndpoints{p: &Provider{cfg: Config{ClusterName: "east", TargetUID: types.UID("0123456789abcdef")}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "svc-uid"}}
	http := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}
	ep := func(ip, node string, ready bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
		if node != "" {
			e.NodeName = ptr.To(node)
			e.Zone = ptr.To("z1")
		}
		return e
	}
	slice := func(name string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: eps}
	}
	got := r.wanted(svc, []*discoveryv1.EndpointSlice{
		slice("web-abc", http, ep("10.1.0.5", "east", true), ep("10.2.0.7", "west", true), ep("10.2.0.8", "west", false)),
		slice("web-remote-x-0", http, ep("10.9.0.3", "", true)), // from above the parent
		slice("web-other", nil, ep("10.1.0.6", "east", true)),   // all in this subtree
	})
	require.Len(t, got, 1)
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-remote-01234567-0", Namespace: "shop",
			Labels:          map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: api.ManagedByRemoteEndpoints, api.LabelTargetUID: "0123456789abcdef"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "svc-uid"}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       http,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.2.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.2.0.8"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			{Addresses: []string{"10.9.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
	}
	require.Equal(t, want, got[0])

	// The label selects (a label value, unlike a key, has no '/').
	require.Empty(t, validation.IsValidLabelValue(api.ManagedByRemoteEndpoints))

	// A Service that prefers close endpoints: the remote ones are hinted
	// for a zone no node is in, so that kube-proxy uses a client's own
	// zone's first and the others only where there are none.
	svc.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	got = r.wanted(svc, []*discoveryv1.EndpointSlice{slice("web-abc", http, ep("10.2.0.7", "west", true))})
	require.Len(t, got, 1)
	require.Equal(t, &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: RemoteZone}}}, got[0].Endpoints[0].Hints)
	svc.Spec.TrafficDistribution = nil

	// Nothing outside the subtree: no slice.
	require.Empty(t, r.wanted(svc, []*discoveryv1.EndpointSlice{slice("web-abc", http, ep("10.1.0.5", "east", true))}))
}
