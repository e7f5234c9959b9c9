package tree

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

const zoneKey = "topology.kubernetes.io/zone"

// deployment makes at the root a Deployment of the demo app, with the
// given replicas and changes to its pods' spec, deleted when the test ends.
func deployment(t *testing.T, ns, name string, replicas int32, change func(*corev1.PodSpec)) {
	t.Helper()
	labels := map[string]string{"app": name}
	spec := appSpec(nil)
	change(&spec)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
	}}
	apps := env.Cluster("root").Client.AppsV1().Deployments(ns)
	_, err := apps.Create(t.Context(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = apps.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// placed waits until want of the app's pods at the root are Ready, and
// returns every pod of the app there with the leaf cluster and real node
// that runs it ("" for a pod that runs nowhere).
func placed(t *testing.T, ns, app string, want int) (pods []corev1.Pod, leaves, nodes []string) {
	t.Helper()
	ctx := t.Context()
	framework.Eventually(t, 3*time.Minute, fmt.Sprintf("%d Ready pods of %s at the root", want, app), func(context.Context) (bool, string) {
		list, err := env.Cluster("root").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range list.Items {
			if podutil.IsPodReady(&list.Items[i]) {
				ready++
			}
		}
		pods = list.Items
		return ready == want, fmt.Sprintf("%d pods, %d Ready", len(list.Items), ready)
	})
	for i := range pods {
		if !podutil.IsPodReady(&pods[i]) {
			leaves, nodes = append(leaves, ""), append(nodes, "")
			continue
		}
		leaf, leafPod, err := leafOf(ctx, &pods[i])
		require.NoError(t, err)
		leaves, nodes = append(leaves, leaf), append(nodes, leaf+"/"+leafPod.Spec.NodeName)
	}
	return pods, leaves, nodes
}

// TestSpreadOverZonesInsideChildren: a Deployment of 8 replicas spread with
// maxSkew 1 over zones, made at the root, where each child holds two zones
// (a leaf each): every zone runs two. The root chose each pod's zone (it
// is written on the pod), and the pod runs in that zone.
func TestSpreadOverZonesInsideChildren(t *testing.T) {
	ns := namespace(t)
	// The four zones as the root sees them: in its children's summaries
	// (a tree just formed may not have reported every leaf yet).
	framework.Eventually(t, time.Minute, "the four zones in the summaries at the root", func(context.Context) (bool, string) {
		zones := map[string]bool{}
		for _, child := range []string{"east", "west"} {
			n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(t.Context(), child, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if s, ok := api.ParseSummary(n); ok {
				for _, g := range s.Groups {
					if z := g.Labels[zoneKey]; z != "" && len(g.Taints) == 0 {
						zones[z] = true
					}
				}
			}
		}
		return len(zones) == 4, fmt.Sprint(zones)
	})
	deployment(t, ns, "zones", 8, func(s *corev1.PodSpec) {
		s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zones"}},
		}}
	})
	pods, leaves, _ := placed(t, ns, "zones", 8)
	require.Len(t, pods, 8)
	byZone := map[string]int{}
	for i := range pods {
		chosen := api.Domains(&pods[i])[zoneKey]
		require.Equal(t, leaves[i], chosen, "%s: zone chosen at the root %q, runs in %s (whose node's zone is its name)", pods[i].Name, chosen, leaves[i])
		byZone[leaves[i]]++
	}
	require.Equal(t, map[string]int{"east-1": 2, "east-2": 2, "west-1": 2, "west-2": 2}, byZone)
}

// TestAntiAffinityOverRealNodes: a Deployment of 5 replicas that may not
// share a host (required anti-affinity on kubernetes.io/hostname), made at
// the root over 4 real nodes in 2 children: 4 run, each on its own node,
// and the fifth stays Pending at the root, saying why.
func TestAntiAffinityOverRealNodes(t *testing.T) {
	fourApartThenPending(t, "apart", corev1.LabelHostname)
}

// TestAntiAffinityOverZonesInsideChildren: a Deployment of 5 replicas that
// may not share a zone, made at the root, where each child spans two zones
// (a leaf each) and so has no zone label of its own: 4 run, one per zone,
// and the fifth stays Pending at the root, saying why, instead of going
// down to a child that has no zone left for it.
func TestAntiAffinityOverZonesInsideChildren(t *testing.T) {
	fourApartThenPending(t, "zones-apart", zoneKey)
}

// fourApartThenPending makes at the root a Deployment app of 5 replicas
// with required anti-affinity to each other on key (the hostname or the
// zone, of which the tree has 4: a real node in each leaf, whose zone is
// the leaf's name): 4 run, one in each domain, and the fifth is
// unschedulable at the root for the anti-affinity.
func fourApartThenPending(t *testing.T, app, key string) {
	ns := namespace(t)
	deployment(t, ns, app, 5, func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey:   key,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			}},
		}}
	})
	pods, leaves, nodes := placed(t, ns, app, 4)
	require.Len(t, pods, 5)
	domains := nodes
	if key == zoneKey {
		domains = leaves
	}
	seen := map[string]string{}
	var pending *corev1.Pod
	for i := range pods {
		if domains[i] == "" {
			pending = &pods[i]
			continue
		}
		require.NotContains(t, seen, domains[i], "%s and %s in one domain of %s", pods[i].Name, seen[domains[i]], key)
		seen[domains[i]] = pods[i].Name
	}
	require.Len(t, seen, 4)
	require.NotNil(t, pending)
	framework.Eventually(t, time.Minute, "the fifth replica unschedulable at the root", func(context.Context) (bool, string) {
		p, err := env.Cluster("root").Client.CoreV1().Pods(ns).Get(t.Context(), pending.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, c := podutil.GetPodCondition(&p.Status, corev1.PodScheduled)
		return p.Spec.NodeName == "" && c != nil && c.Reason == corev1.PodReasonUnschedulable &&
			strings.Contains(c.Message, "anti-affinity"), fmt.Sprintf("node %q, %+v", p.Spec.NodeName, c)
	})
}

// TestAffinityToAZoneInsideAChild: replicas that must share a zone with an
// anchor pod (required affinity on the zone), made at the root, where the
// anchor runs in west-2, a zone inside west: they go down to west, which
// has no zone label of its own, and run in west-2 beside it.
func TestAffinityToAZoneInsideAChild(t *testing.T) {
	ns := namespace(t)
	deployment(t, ns, "anchor", 1, func(s *corev1.PodSpec) {
		s.NodeSelector = map[string]string{zoneKey: "west-2"}
	})
	_, leaves, _ := placed(t, ns, "anchor", 1)
	require.Equal(t, []string{"west-2"}, leaves)
	deployment(t, ns, "beside", 2, func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey:   zoneKey,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "anchor"}},
			}},
		}}
	})
	_, leaves, _ = placed(t, ns, "beside", 2)
	require.Equal(t, []string{"west-2", "west-2"}, leaves)
}
