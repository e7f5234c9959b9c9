package parent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/peers"
	"github.com/nestlet/nestlet/provider/peers/peerstest"
)

// The parent's decorator makes each child with a gateway key a peer routed
// the CIDRs of its subtree it is granted (here from the pool, first come),
// and tells it the parent's gateway and what the parent carries; a CIDR
// a child claims that another holds is routed to the one that holds it.
func TestDecoratorGatewayRoutes(t *testing.T) {
	ka, kb, kc, kp := peerstest.PublicKey(), peerstest.PublicKey(), peerstest.PublicKey(), peerstest.PublicKey()
	child := func(name string, key wgtypes.Key, cidrs ...string) *corev1.Node {
		raw, err := api.FormatSummary(api.Summary{Cluster: name, Covered: []string{name}, PodCIDRs: cidrs})
		require.NoError(t, err)
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelCluster: name},
			Annotations: map[string]string{api.AnnotationSummary: raw, api.AnnotationGatewayKey: key.String()}}}
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.1.0.0/24"}}},
		child("a", ka, "10.10.0.0/24"),
		child("b", kb, "10.244.0.0/16"),
		child("c", kc, "10.244.5.0/24", "10.60.0.0/24"),
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var objs []runtime.Object
	for _, n := range nodes {
		require.NoError(t, indexer.Add(n))
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	gw := peerstest.NewGateway()
	tun := peers.New(gw, "10.250.0.2:51820", 0, corelisters.NewNodeLister(indexer))
	// This cluster's own parent carries 10.50.0.0/16 (and this cluster's
	// own CIDRs, which are never routed up).
	tun.SetParent(t.Context(), "up", &api.GatewayParent{PublicKey: kp.String(), Endpoint: "10.250.0.9:51820",
		Routes: []string{"10.50.0.0/16", "10.1.0.0/24", "10.10.0.0/24"}}, []string{"10.1.0.0/24", "10.10.0.0/24"})
	lister := corelisters.NewNodeLister(indexer)
	d := &decorator{client: client, nodes: lister, peers: tun, grants: poolGrants(lister, tun, "10.0.0.0/8")}
	for _, n := range []string{"a", "b", "c"} {
		_, err := d.sync(t.Context(), n)
		require.NoError(t, err)
	}
	require.Equal(t, peerstest.Prefixes("10.10.0.0/24"), gw.Allowed(ka))
	require.Equal(t, peerstest.Prefixes("10.244.0.0/16"), gw.Allowed(kb), "b holds its /16 of the pool first")
	require.Equal(t, peerstest.Prefixes("10.60.0.0/24"), gw.Allowed(kc), "c's CIDR that b holds gets no route, its other one does")
	require.Equal(t, peerstest.Prefixes("10.50.0.0/16"), gw.Allowed(kp))

	n, err := client.CoreV1().Nodes().Get(t.Context(), "a", metav1.GetOptions{})
	require.NoError(t, err)
	var gp api.GatewayParent
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[api.AnnotationGatewayParent]), &gp))
	require.Equal(t, api.GatewayParent{PublicKey: gw.Key.String(), Endpoint: "10.250.0.2:51820",
		Routes: []string{"10.1.0.0/24", "10.10.0.0/24", "10.50.0.0/16"}, PeerKey: ka.String()}, gp,
		"this cluster's nodes, its routed children and what its parent carries; the child's key it knows")
	n, err = client.CoreV1().Nodes().Get(t.Context(), "c", metav1.GetOptions{})
	require.NoError(t, err)
	gp = api.GatewayParent{}
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[api.AnnotationGatewayParent]), &gp))
	require.Equal(t, kc.String(), gp.PeerKey, "c is a peer, for what does not overlap")
	require.Equal(t, "not granted: 10.244.5.0/24 (held by cluster b)", n.Annotations[api.AnnotationPodCIDRsRefused], "c is told why")
	require.Contains(t, n.Annotations[api.AnnotationPodCIDROverlap], "10.244.5.0/24 overlaps 10.244.0.0/16 of cluster b", "and that its pod IPs are ambiguous")
	n, err = client.CoreV1().Nodes().Get(t.Context(), "b", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, api.PodCIDROverlapNone, n.Annotations[api.AnnotationPodCIDRsRefused], "b keeps what it held")

	// A child that goes loses its peer.
	require.NoError(t, indexer.Delete(nodes[1]))
	_, err = d.sync(t.Context(), "a")
	require.NoError(t, err)
	require.Empty(t, gw.Allowed(ka))
}
