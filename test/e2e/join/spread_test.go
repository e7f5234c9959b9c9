package join

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

// TestSpreadOverHostsOfUnequalChildren: a Deployment of 12 replicas made
// at the root, spread with maxSkew 1 over kubernetes.io/hostname, over
// children of unequal sizes: east has two nodes, west one, mid three (one
// in leaf-a, two in leaf-b). Every one of the six nodes runs two, where
// judging each child as one host would give each child four and put four
// on west's one node. The constraint honours taints (nodeTaintsPolicy
// Honor), as it should wherever a node can be lost: the child an earlier
// test left dead is tainted unreachable, and its empty nodes would
// otherwise hold every other node to one replica.
func TestSpreadOverHostsOfUnequalChildren(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root").Client
	want := map[string]int{"east": 2, "west": 1, "mid": 3}
	framework.EventuallyEvery(t, time.Second, 2*time.Minute, fmt.Sprintf("the children's summaries at the root count %v nodes", want), func(ctx context.Context) (bool, string) {
		for child, nodes := range want {
			n, err := root.CoreV1().Nodes().Get(ctx, child, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			s, ok := api.ParseSummary(n)
			if !ok {
				return false, child + " has no summary"
			}
			counted := 0
			for _, g := range s.Groups {
				counted += g.Nodes
			}
			if counted != nodes {
				return false, fmt.Sprintf("%s counts %d", child, counted)
			}
		}
		return true, ""
	})

	ns := framework.Namespace(t, root, "spread")
	labels := map[string]string{"app": "hosts"}
	_, err := root.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "hosts"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](12), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "app", Image: "busybox"}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector:    &metav1.LabelSelector{MatchLabels: labels},
				NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
			}},
		}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Where they run: the pods of the namespace on each leaf's kwok nodes.
	leaves := []string{"east", "west", "leaf-a", "leaf-b"}
	var byNode map[string]int
	framework.EventuallyEvery(t, time.Second, 3*time.Minute, "12 replicas running in the leaves", func(ctx context.Context) (bool, string) {
		byNode = map[string]int{}
		running := 0
		for _, leaf := range leaves {
			list, err := env.Cluster(leaf).Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning {
					byNode[leaf+"/"+p.Spec.NodeName]++
					running++
				}
			}
		}
		return running == 12, fmt.Sprint(byNode)
	})
	require.Equal(t, map[string]int{"east/east-1": 2, "east/east-2": 2, "west/west-1": 2,
		"leaf-a/leaf-a-1": 2, "leaf-b/leaf-b-1": 2, "leaf-b/leaf-b-2": 2}, byNode)
}
