package forward

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/test/framework"
)

// endpoint is what an EndpointSlice says of one address.
type endpoint struct {
	Ready bool
	Node  string
}

// spreadDeployment runs replicas of name evenly over both regions.
func spreadDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	d := deployment(ns, name, replicas, "")
	d.Spec.Template.Spec.NodeSelector = nil
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/region", Operator: corev1.NodeSelectorOpIn, Values: []string{"east", "west"}}},
		}}},
	}}
	d.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	// Other tests of the package leave pods in east: spread by region
	// whatever the water levels.
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "topology.kubernetes.io/region", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
	}}
	return d
}

func service(ns, name string, headless bool) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}

// endpointsOf returns the endpoints of Service ns/name in cluster, by
// address, from every EndpointSlice of the Service.
func endpointsOf(ctx context.Context, cluster, ns, name string) (map[string]endpoint, error) {
	list, err := env.Cluster(cluster).Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return nil, err
	}
	out := map[string]endpoint{}
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if _, dup := out[a]; dup {
					return nil, fmt.Errorf("address %s listed twice", a)
				}
				out[a] = endpoint{Ready: ptr.Deref(e.Conditions.Ready, false), Node: ptr.Deref(e.NodeName, "")}
			}
		}
	}
	return out, nil
}

// podEndpoints returns what the endpoints of the pods selected by app in
// cluster should be: every pod with an IP that has not ended, ready as
// the pod is at that level, on the node it is bound to at that level.
func podEndpoints(ctx context.Context, cluster, ns, app string) (map[string]endpoint, error) {
	list, err := env.Cluster(cluster).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	out := map[string]endpoint{}
	for _, p := range list.Items {
		if p.Status.PodIP == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out[p.Status.PodIP] = endpoint{Ready: podutil.IsPodReady(&p) && p.DeletionTimestamp == nil, Node: p.Spec.NodeName}
	}
	return out, nil
}

// waitEndpoints waits until, in every cluster, Service ns/app exists
// exactly where pods selected by app are (always at the root), with
// exactly those pods as endpoints, and the root has wantReady ready ones.
// It returns how long that took.
func waitEndpoints(t *testing.T, ns, app string, wantReady int) time.Duration {
	t.Helper()
	start := time.Now()
	framework.EventuallyEvery(t, 100*time.Millisecond, 90*time.Second, fmt.Sprintf("endpoints of %s/%s where its pods are", ns, app), func(ctx context.Context) (bool, string) {
		for _, c := range allClusters {
			if why := endpointsMismatch(ctx, c, ns, app, wantReady); why != "" {
				return false, why
			}
		}
		return true, ""
	})
	return time.Since(start)
}

func endpointsMismatch(ctx context.Context, cluster, ns, app string, wantReady int) string {
	want, err := podEndpoints(ctx, cluster, ns, app)
	if err != nil {
		return err.Error()
	}
	_, err = env.Cluster(cluster).Client.CoreV1().Services(ns).Get(ctx, app, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && (len(want) > 0 || cluster == "root"):
		return fmt.Sprintf("%s has %d pods of %s but no Service", cluster, len(want), app)
	case err == nil && len(want) == 0 && cluster != "root":
		return fmt.Sprintf("%s has no pods of %s but still the Service", cluster, app)
	case err != nil && !apierrors.IsNotFound(err):
		return err.Error()
	}
	got, err := endpointsOf(ctx, cluster, ns, app)
	if err != nil {
		return fmt.Sprintf("%s: %v", cluster, err)
	}
	if !maps.Equal(got, want) {
		return fmt.Sprintf("%s: endpoints %v, pods %v", cluster, got, want)
	}
	if cluster == "root" {
		ready := 0
		for _, e := range got {
			if e.Ready {
				ready++
			}
		}
		if ready != wantReady {
			return fmt.Sprintf("root: %d ready endpoints, want %d", ready, wantReady)
		}
	}
	return ""
}

// holding returns the clusters other than the root that have a Service
// ns/name.
func holding(t *testing.T, ns, name string) []string {
	t.Helper()
	var out []string
	for _, c := range allClusters[1:] {
		_, err := env.Cluster(c).Client.CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err == nil {
			out = append(out, c)
		} else {
			require.True(t, apierrors.IsNotFound(err), err)
		}
	}
	slices.Sort(out)
	return out
}
