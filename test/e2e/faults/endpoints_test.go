package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/test/framework"
)

// endpointsByNode counts the endpoints of Service name in cluster by node
// name and state ("east/ready", "east/not-ready", "east/terminating").
func endpointsByNode(ctx context.Context, cluster, ns, name string) (map[string]int, error) {
	slices, err := env.Cluster(cluster).Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			state := "ready"
			switch {
			case ptr.Deref(e.Conditions.Terminating, false):
				state = "terminating"
			case !ptr.Deref(e.Conditions.Ready, false):
				state = "not-ready"
			}
			out[ptr.Deref(e.NodeName, "")+"/"+state]++
		}
	}
	return out, nil
}

// podsReadiness says, for a failed wait, what the cluster's EndpointSlice
// controller had to go by: each pod's node, IP and Ready condition.
func podsReadiness(ctx context.Context, cluster, ns string) string {
	list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "pods: " + err.Error()
	}
	var out []string
	for _, p := range list.Items {
		ready := "no Ready condition"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = "Ready=" + string(c.Status)
			}
		}
		out = append(out, fmt.Sprintf("%s on %q ip %q %s %s", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.Phase, ready))
	}
	return "pods: " + strings.Join(out, ", ")
}

// The endpoints of a lost child follow the node lifecycle at the root: not
// ready once the child is unreachable, terminating once its pods are
// evicted, with the replacements' ready beside them, and gone after the
// heal. The cut-off child keeps serving its own copy of the Service
// meanwhile, and drops it after the heal.
func TestLostChildEndpoints(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const replicas = 6
	d := deployment(ns, "web", replicas)
	// 20 s as unreachable before eviction: long enough to see the
	// endpoints not ready first.
	for i, tol := range d.Spec.Template.Spec.Tolerations {
		if tol.Key == corev1.TaintNodeUnreachable {
			d.Spec.Template.Spec.Tolerations[i].TolerationSeconds = ptr.To[int64](20)
		}
	}
	root := env.Cluster("root").Client
	_, err := root.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	before := settle(t, ns, replicas, 2*time.Minute)
	require.NotZero(t, before["east"], "some replicas run in east: %v", before)
	waitEndpoints := func(what, cluster string, want map[string]int, timeout time.Duration) {
		t.Helper()
		framework.Eventually(t, timeout, fmt.Sprintf("%s: endpoints of web in %s %v", what, cluster, want), func(ctx context.Context) (bool, string) {
			got, err := endpointsByNode(ctx, cluster, ns, "web")
			if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
				return true, ""
			}
			return false, fmt.Sprint(got, err) + "; " + podsReadiness(ctx, cluster, ns)
		})
	}
	// The root's EndpointSlice controller follows its pods' readiness,
	// which comes up from the children: 2 minutes, as the waits below.
	waitEndpoints("before the cut", "root", map[string]int{"east/ready": before["east"], "west/ready": before["west"]}, 2*time.Minute)
	// East's own copy of the Service lists its pods, on its kwok nodes.
	var eastEndpoints map[string]int
	framework.Eventually(t, time.Minute, fmt.Sprintf("east's copy of web has %d ready endpoints", before["east"]), func(ctx context.Context) (bool, string) {
		got, err := endpointsByNode(ctx, "east", ns, "web")
		eastEndpoints = got
		ready := 0
		for k, n := range got {
			if strings.HasSuffix(k, "/ready") {
				ready += n
			}
		}
		return err == nil && ready == before["east"], fmt.Sprint(got, err)
	})

	link := tree.Link("east", "root")
	require.NoError(t, link.Cut())
	cut := time.Now()
	defer func() { _ = link.Restore() }()
	waitEndpoints("east unreachable", "root", map[string]int{"east/not-ready": before["east"], "west/ready": before["west"]}, time.Minute)
	t.Logf("east's endpoints not ready at the root %s after the cut", time.Since(cut).Round(time.Second))
	// Evicted pods of an unreachable node stay Terminating until it is
	// back, as in one cluster: listed, terminating, never ready.
	waitEndpoints("east's pods replaced", "root", map[string]int{"east/terminating": before["east"], "west/ready": replicas}, 2*time.Minute)
	t.Logf("west's replacements ready at the root %s after the cut", time.Since(cut).Round(time.Second))
	during, err := endpointsByNode(ctx, "east", ns, "web")
	require.NoError(t, err)
	require.Equal(t, eastEndpoints, during, "east keeps serving its copy of the Service while cut off")

	require.NoError(t, link.Restore())
	settle(t, ns, replicas, 2*time.Minute)
	waitEndpoints("after the heal", "root", map[string]int{"west/ready": replicas}, time.Minute)
	framework.Eventually(t, time.Minute, "east drops its copy of web once it runs none of its pods", func(ctx context.Context) (bool, string) {
		_, err := env.Cluster("east").Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
