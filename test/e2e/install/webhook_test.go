package install

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// optedIn is the label of the namespaces whose pods the chart's scheduling
// webhook routes to Nestlet's scheduler (webhook.namespaceSelector).
const optedIn = "nestlet.io/schedule"

// TestWebhookRoutesPlainDeployments: the root's default scheduler is the
// stock kube-scheduler. A plain Deployment (no schedulerName, no
// toleration) with a region nodeSelector, in a namespace labelled for the
// chart's scheduling webhook, runs in east-1: the webhook gave its pods
// Nestlet's scheduler and the virtual nodes' toleration. The same pod in a
// namespace not labelled stays Pending, the stock scheduler saying the
// virtual node's taint is not tolerated.
func TestWebhookRoutesPlainDeployments(t *testing.T) {
	ns := optedInNamespace(t, nil)
	ctx := t.Context()
	root := env.Cluster("root")

	pods := webDeployment(t, ns, "plain", 2, func(d *appsv1.Deployment) { d.Spec.Template.Spec.SchedulerName = "" })
	for _, p := range pods {
		require.Equal(t, "east", p.Spec.NodeName, p.Name)
		require.Equal(t, chartScheduler, p.Spec.SchedulerName, "the webhook's scheduler")
		require.True(t, tolerates(&p), "the webhook's toleration: %v", p.Spec.Tolerations)
	}
	d, err := root.Client.AppsV1().Deployments(ns).Get(ctx, "plain", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, d.Spec.Template.Spec.Tolerations, "the Deployment itself is the user's, unchanged")

	other := framework.KeptNamespace(t, root.Client, "t")
	plainPod(t, other, "not-routed")
	var message string
	framework.EventuallyEvery(t, time.Second, 2*time.Minute, "the stock scheduler's FailedScheduling event for a pod not routed", func(ctx context.Context) (bool, string) {
		events, err := root.Client.CoreV1().Events(other).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "not-routed", "reason": "FailedScheduling"}.AsSelector().String()})
		if err != nil || len(events.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		message = events.Items[0].Message
		return true, ""
	})
	p, err := root.Client.CoreV1().Pods(other).Get(ctx, "not-routed", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, p.Spec.NodeName, "a pod of a namespace not opted in was placed")
	require.Equal(t, corev1.DefaultSchedulerName, p.Spec.SchedulerName)
	// The one node of region east is the virtual node, with its taint.
	require.True(t, strings.Contains(message, "untolerated taint"), "why it was not placed: %s", message)
}

// tolerates reports whether the pod tolerates the virtual nodes' taint.
func tolerates(p *corev1.Pod) bool {
	taint := corev1.Taint{Key: api.TaintKeyProvider, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}
	for _, t := range p.Spec.Tolerations {
		if t.ToleratesTaint(klog.Background(), &taint, false) {
			return true
		}
	}
	return false
}

// TestAgentRefusesUntoleratedPods: whatever binds a pod to a virtual node,
// east's agent forwards it only when the pod tolerates the virtual nodes'
// taint or names Nestlet's scheduler. A pod of a namespace not opted in,
// bound to east by hand, is failed by the agent with an event saying why.
// The pod of a DaemonSet that tolerates every taint is never made: the
// chart's policy of children (agent.childrenPolicy) refuses it, and the
// DaemonSet controller says so (were it made, the agent would fail it
// too: provider/forward's unit test). Nothing of theirs reaches east.
func TestAgentRefusesUntoleratedPods(t *testing.T) {
	newNamespace(t)
	ctx := t.Context()
	root, east := env.Cluster("root"), env.Cluster("east")
	ns := framework.Namespace(t, root.Client, "t")
	app := []corev1.Container{{Name: "app", Image: launcher.DemoAppImage}}
	_, err := root.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bound-by-hand"},
		Spec:       corev1.PodSpec{NodeName: "east", Containers: app},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	sel := map[string]string{"app": "everywhere"}
	_, err = root.Client.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "everywhere"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{
					// Only the virtual nodes, tolerating everything.
					NodeSelector: map[string]string{api.LabelNodeType: api.NodeTypeVirtualKubelet},
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:   app,
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	refused := map[string]string{} // message by pod name
	framework.EventuallyEvery(t, time.Second, 2*time.Minute, "events of the agent's refusals", func(ctx context.Context) (bool, string) {
		events, err := root.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"reason": api.ReasonNotAdmitted}.AsSelector().String()})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			refused[e.InvolvedObject.Name] = e.Message
		}
		daemon, _ := framework.DaemonSetRefused(ctx, root.Client, ns, "everywhere")
		return daemon && refused["bound-by-hand"] != "", fmt.Sprintf("DaemonSet refused by the policy: %t; the agent's refusals: %v", daemon, refused)
	})
	require.Contains(t, refused["bound-by-hand"], "neither tolerates the virtual nodes' taint")
	p, err := root.Client.CoreV1().Pods(ns).Get(ctx, "bound-by-hand", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodFailed, p.Status.Phase)
	require.Equal(t, api.ReasonNotAdmitted, p.Status.Reason)
	pods, err := east.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, pods.Items, "pods forwarded to east")
}

// TestNamespacePolicyWithTheStockScheduler: the root's default scheduler is
// the stock one; a namespace opted in for the webhook and limited, by its
// annotation nestlet.io/clusters, to a child the root does not have: a
// plain pod there with east's region is routed to Nestlet's scheduler and
// stays Pending with the policy's reason, never placed on east
// (docs/tenants.md).
func TestNamespacePolicyWithTheStockScheduler(t *testing.T) {
	ns := optedInNamespace(t, map[string]string{api.AnnotationNamespaceClusters: api.LabelCluster + "=west"})
	root := env.Cluster("root")
	plainPod(t, ns, "kept")
	framework.Eventually(t, 2*time.Minute, "the pod Pending with the namespace's reason", func(ctx context.Context) (bool, string) {
		p, err := root.Client.CoreV1().Pods(ns).Get(ctx, "kept", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		require.Empty(t, p.Spec.NodeName, "placed despite its namespace's policy")
		msg := ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				msg = c.Message
			}
		}
		return p.Spec.SchedulerName == chartScheduler && strings.Contains(msg, "only to clusters matching nestlet.io/cluster=west"),
			fmt.Sprintf("scheduler %s: %s", p.Spec.SchedulerName, msg)
	})
}

// plainPod creates at the root a pod of the demo app in east's region, with
// no scheduler and no toleration, as a user writes it.
func plainPod(t *testing.T, ns, name string) {
	t.Helper()
	_, err := env.Cluster("root").Client.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"topology.kubernetes.io/region": region},
			Containers:   []corev1.Container{{Name: "app", Image: launcher.DemoAppImage}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// optedInNamespace makes a namespace at the root labelled for the chart's
// scheduling webhook, with the annotations given.
func optedInNamespace(t *testing.T, annotations map[string]string) string {
	t.Helper()
	ns := newNamespace(t)
	namespaces := env.Cluster("root").Client.CoreV1().Namespaces()
	n, err := namespaces.Get(t.Context(), ns, metav1.GetOptions{})
	require.NoError(t, err)
	n.Labels[optedIn] = "true"
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	maps.Copy(n.Annotations, annotations)
	_, err = namespaces.Update(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
	return ns
}
