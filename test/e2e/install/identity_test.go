package install

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/forward"
	"github.com/nestlet/nestlet/test/framework"
)

// TestChartIdentities: no Nestlet program runs on any host; in every
// cluster the chart's components run as pods on its real node, each under
// its own ServiceAccount from the chart: what the other tests of the
// package did, these identities did.
func TestChartIdentities(t *testing.T) {
	newNamespace(t)
	own := map[string]bool{}
	for _, b := range []string{env.Nestlet.Nestlet, env.Nestlet.Nestctl, env.Nestlet.Scheduler, env.Nestlet.Proxy} {
		p, err := filepath.EvalSymlinks(b)
		require.NoError(t, err)
		own[p] = true
	}
	for _, p := range env.Processes() {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(p.PID()) + "/exe")
		if err != nil {
			continue // ended
		}
		require.False(t, own[exe], "process %s runs %s on a host", p.Name, exe)
	}

	for _, at := range tree {
		// The chart's defaults: two agents (one elected), one scheduler.
		cluster, components := at.name, []string{"agent", "agent", "scheduler"}
		if hasChildren(cluster) {
			for range proxyReplicas {
				components = append(components, "proxy")
			}
		}
		c := env.Cluster(cluster)
		// With the gateway, a route agent on each real node.
		var nodes []string
		for _, n := range c.RealNodes() {
			components = append(components, "routes")
			nodes = append(nodes, n.Name)
		}
		pods, err := c.Client.CoreV1().Pods(chartNamespace).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		var got []string
		for _, p := range pods.Items {
			component := p.Labels["app.kubernetes.io/component"]
			got = append(got, component)
			require.Equal(t, corev1.PodRunning, p.Status.Phase, "%s: %s", cluster, p.Name)
			require.Contains(t, nodes, p.Spec.NodeName, "%s: %s runs on no real node of its cluster", cluster, p.Name)
			if component == "agent" {
				require.Equal(t, at.node, p.Spec.NodeName, "%s: %s is not on the node it is pinned to", cluster, p.Name)
			}
			require.Equal(t, release+"-"+component, p.Spec.ServiceAccountName, "%s: %s", cluster, p.Name)
			_, err := c.Client.CoreV1().ServiceAccounts(chartNamespace).Get(t.Context(), p.Spec.ServiceAccountName, metav1.GetOptions{})
			require.NoError(t, err, "%s: the chart's ServiceAccount of %s", cluster, p.Name)
		}
		require.ElementsMatch(t, components, got, "%s: the chart's components", cluster)

		// Their requests are served under the chart's FlowSchemas, at the
		// controllers' priority levels (only these ServiceAccounts match).
		dispatched, err := framework.DispatchedByFlowSchema(t.Context(), c)
		require.NoError(t, err)
		for _, key := range []string{"nestlet/workload-high", "nestlet-leader-election/leader-election"} {
			require.Positive(t, dispatched[key], "%s: no request dispatched as %s: %v", cluster, key, dispatched)
		}
	}
}

// TestAgentWritesOnlyItsOwn: RBAC lets the agent write ConfigMaps, pods and
// nodes wherever they are, and read ConfigMaps and Secrets nowhere but in
// its namespace; the chart's admission policy narrows the writes to
// Nestlet's own objects. Acting as east's agent (its ServiceAccount's
// name, authenticated for real), a ConfigMap nobody labelled can be
// neither changed nor deleted, a node that is not virtual cannot be
// patched, while a labelled ConfigMap of its own can be made and deleted
// (the control: RBAC allows all of these). The same for namespaces: one
// the agent did not make cannot be deleted, one labelled as made by it can;
// and PriorityClasses.
func TestAgentWritesOnlyItsOwn(t *testing.T) {
	newNamespace(t)
	ctx := t.Context()
	east := env.Cluster("east")
	ns := framework.KeptNamespace(t, east.Client, "w")
	cfg, err := east.NewClientForUser("system:serviceaccount:"+chartNamespace+":"+release+"-agent",
		"system:serviceaccounts", "system:serviceaccounts:"+chartNamespace, "system:authenticated")
	require.NoError(t, err)
	agent, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	_, err = east.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-nestlets"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	refused := func(err error, what string) {
		t.Helper()
		require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%s: %v", what, err)
		require.Contains(t, err.Error(), "may write only its own objects", what)
	}
	// Outside its namespace it reads no ConfigMap and no Secret.
	_, err = agent.CoreV1().ConfigMaps(ns).Get(ctx, "not-nestlets", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "reading a ConfigMap outside its namespace: %v", err)
	_, err = agent.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "listing the Secrets of kube-system: %v", err)
	_, err = agent.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "listing every Secret: %v", err)
	_, err = agent.CoreV1().ConfigMaps(ns).Patch(ctx, "not-nestlets", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+api.LabelTargetUID+`":"taken"}}}`), metav1.PatchOptions{})
	refused(err, "labelling a ConfigMap to take it over")
	refused(agent.CoreV1().ConfigMaps(ns).Delete(ctx, "not-nestlets", metav1.DeleteOptions{}), "deleting a ConfigMap not Nestlet's")
	_, err = agent.CoreV1().Nodes().Patch(ctx, eastNode, types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/x":"y"}}}`), metav1.PatchOptions{})
	refused(err, "patching a real node")

	refused(agent.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}), "deleting a namespace it did not make")

	made := framework.KeptNamespace(t, east.Client, "made")
	_, err = east.Client.CoreV1().Namespaces().Patch(ctx, made, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+forward.LabelNamespaceManagedBy+`":"`+forward.NamespaceManagedBy+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, agent.CoreV1().Namespaces().Delete(ctx, made, metav1.DeleteOptions{}), "a namespace of its own, once idle")
	_, err = agent.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a-copy",
		Labels: map[string]string{api.LabelTargetUID: "some-target"}}}, metav1.CreateOptions{})
	require.NoError(t, err, "a labelled copy of its own")
	require.NoError(t, agent.CoreV1().ConfigMaps(ns).Delete(ctx, "a-copy", metav1.DeleteOptions{}))
	_, err = east.Client.CoreV1().ConfigMaps(ns).Get(ctx, "not-nestlets", metav1.GetOptions{})
	require.NoError(t, err, "the ConfigMap not Nestlet's is still there")

	// PriorityClasses: it reads them, and deletes only a copy it made
	// (replaced when the parent's value changed), never the admin's.
	classes := east.Client.SchedulingV1().PriorityClasses()
	admins := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-admins"}, Value: 10}
	copied := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-copied",
		Labels: map[string]string{forward.LabelNamespaceManagedBy: forward.NamespaceManagedBy}}, Value: 10}
	for _, pc := range []*schedulingv1.PriorityClass{admins, copied} {
		_, err = classes.Create(ctx, pc, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = classes.Delete(context.Background(), pc.Name, metav1.DeleteOptions{}) })
	}
	_, err = agent.SchedulingV1().PriorityClasses().Get(ctx, admins.Name, metav1.GetOptions{})
	require.NoError(t, err, "reading a PriorityClass")
	refused(agent.SchedulingV1().PriorityClasses().Delete(ctx, admins.Name, metav1.DeleteOptions{}), "deleting a PriorityClass it did not make")
	require.NoError(t, agent.SchedulingV1().PriorityClasses().Delete(ctx, copied.Name, metav1.DeleteOptions{}), "a copy of its own")
}
