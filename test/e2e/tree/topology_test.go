package tree

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/provider/forward"
	"github.com/nestlet/nestlet/test/framework"
)

// TestPreferCloseAcrossTheTree: a Service with trafficDistribution
// PreferClose over the replicas in east-2 and west-2. A client in east-2
// is answered by east-2's replica only (kube-proxy there keeps the
// endpoints hinted for its zone; the remote ones are hinted for none);
// once that replica is gone, by west-2's through the tunnels.
func TestPreferCloseAcrossTheTree(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	answer, _ := webEastWest(t, ns)
	_, err := root.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-near"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, TrafficDistribution: ptr.To(corev1.ServiceTrafficDistributionPreferClose),
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client-east-2"},
		Spec: appSpec(map[string]string{"topology.kubernetes.io/zone": "east-2"})}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 3*time.Minute, "client-east-2 Ready", func(context.Context) (bool, string) {
		p, err := root.CoreV1().Pods(ns).Get(ctx, "client-east-2", metav1.GetOptions{})
		return err == nil && podutil.IsPodReady(p), fmt.Sprint(err)
	})
	ask := func(n int) (map[string]int, string) {
		sides, last := map[string]int{}, ""
		for range n {
			out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", "client-east-2", "--", "/demo-app", "get", "http://web-near/from-east-2")
			last = fmt.Sprintf("%q %q %v", out, errOut, err)
			for side, a := range answer {
				if err == nil && out == a {
					sides[side]++
				}
			}
		}
		return sides, last
	}
	framework.Eventually(t, 2*time.Minute, "every endpoint of web-near in east-2 hinted for a zone", func(context.Context) (bool, string) {
		list, err := env.Cluster("east-2").Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=web-near"})
		if err != nil {
			return false, err.Error()
		}
		zones := []string{}
		for _, es := range list.Items {
			for _, e := range es.Endpoints {
				if e.Hints == nil || len(e.Hints.ForZones) == 0 {
					return false, fmt.Sprintf("%v has no hints in %s", e.Addresses, es.Name)
				}
				zones = append(zones, e.Hints.ForZones[0].Name)
			}
		}
		slices.Sort(zones)
		return slices.Equal(zones, []string{"east-2", forward.RemoteZone}), fmt.Sprint(zones)
	})
	// Sixteen requests in a row go to the replica beside the client:
	// without hints, each would go to west-2 half the time (1 in 65,536 to
	// pass by chance on one try).
	framework.Eventually(t, 2*time.Minute, "east-2's replica alone answers client-east-2", func(context.Context) (bool, string) {
		sides, last := ask(16)
		return sides["east-2"] == 16, fmt.Sprintf("%v; last %s", sides, last)
	})

	require.NoError(t, root.AppsV1().Deployments(ns).Delete(ctx, "web-east-2", metav1.DeleteOptions{}))
	framework.Eventually(t, 2*time.Minute, "west-2's replica answers client-east-2 once east-2 has none", func(context.Context) (bool, string) {
		sides, last := ask(2)
		return sides["west-2"] == 2, fmt.Sprintf("%v; last %s", sides, last)
	})
}
