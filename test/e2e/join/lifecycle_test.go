package join

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// The child's identity in the parent is a kubelet's: it may not read the
// parent's Secrets or list all pods.
func TestNodeIdentityIsScoped(t *testing.T) {
	cfg, _, err := framework.ChildNodeConfig(t.Context(), env.Cluster("east"), env.Cluster("root"), targetOf["east"])
	require.NoError(t, err)
	client := kubernetes.NewForConfigOrDie(cfg)

	_, err = client.CoreV1().Secrets(metav1.NamespaceDefault).Get(t.Context(), "anything", metav1.GetOptions{})
	require.Truef(t, apierrors.IsForbidden(err), "GET secret: want 403, got %v", err)
	_, err = client.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	require.Truef(t, apierrors.IsForbidden(err), "list all pods: want 403, got %v", err)
	// It may see its own node.
	_, err = client.CoreV1().Nodes().Get(t.Context(), "east", metav1.GetOptions{})
	require.NoError(t, err)
}

// A parent without auto-approval: the child waits with AwaitingApproval
// until `nestctl approve`; labels and taints changed at run time reach the
// node; deleting the Target removes the node. A denied CSR ends in
// CSRDenied with no node.
func TestManualApprovalAndRuntimeChanges(t *testing.T) {
	ctx := t.Context()
	east, west := env.Cluster("east"), env.Cluster("west")

	name, err := launcher.Join(ctx, east, west, launcher.JoinOptions{
		ClusterName: "west-manual", ManualApproval: true, NoWait: true,
		ExtraJoinArgs: []string{"--name=to-east-manual", "--report-frequency=2s"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { deleteTarget(t, "west", name) })
	tg := waitReason(t, "west", name, v1alpha1.ReasonAwaitingApproval)
	require.Contains(t, launcher.TargetCondition(tg, v1alpha1.ConditionReady).Message, "nestctl approve west-manual")
	requireNoNode(t, "east", "west-manual")

	out, err := east.Nestctl(ctx, "approve", "west-manual")
	require.NoError(t, err)
	require.Contains(t, out, "approved")
	require.NoError(t, west.WaitTargetReady(ctx, name, time.Minute))
	waitNode(t, "east", "west-manual", time.Minute, func(n *corev1.Node) bool {
		_, role := n.Labels[api.LabelNodeRoleCluster]
		return launcher.NodeReady(n) && role
	})
	tg = getTarget(t, "west", name)
	require.NotNil(t, tg.Status.CertificateExpiry)
	require.Equal(t, "west-manual", tg.Status.NodeName)
	require.Equal(t, "east", tg.Status.ParentClusterName)

	// Change labels and taints at run time.
	updateTarget(t, "west", name, func(tg *v1alpha1.Target) {
		tg.Spec.Labels = map[string]string{"example.com/tier": "gold"}
		tg.Spec.Taints = []corev1.Taint{{Key: "example.com/dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
	})
	waitNode(t, "east", "west-manual", time.Minute, func(n *corev1.Node) bool {
		return n.Labels["example.com/tier"] == "gold" && hasTaint(n, "example.com/dedicated") && hasTaint(n, api.TaintKeyProvider)
	})
	// And back.
	updateTarget(t, "west", name, func(tg *v1alpha1.Target) { tg.Spec.Labels, tg.Spec.Taints = nil, nil })
	waitNode(t, "east", "west-manual", time.Minute, func(n *corev1.Node) bool {
		_, labelled := n.Labels["example.com/tier"]
		return !labelled && !hasTaint(n, "example.com/dedicated") && hasTaint(n, api.TaintKeyProvider)
	})

	// Deleting the Target removes the node from the parent.
	deleteTarget(t, "west", name)
	framework.EventuallyEvery(t, 100*time.Millisecond, time.Minute, "node west-manual gone from the parent after its Target was deleted", func(ctx context.Context) (bool, string) {
		_, err := east.Client.CoreV1().Nodes().Get(ctx, "west-manual", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	_, err = west.Client.CoreV1().Secrets("nestlet-system").Get(ctx, api.IdentitySecretName(name), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "identity secret left behind")

	// A denied request.
	denied, err := launcher.Join(ctx, east, west, launcher.JoinOptions{
		ClusterName: "west-denied", ManualApproval: true, NoWait: true, ExtraJoinArgs: []string{"--name=to-east-denied"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { deleteTarget(t, "west", denied) })
	waitReason(t, "west", denied, v1alpha1.ReasonAwaitingApproval)
	csrs, err := east.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	found := false
	for i := range csrs.Items {
		csr := &csrs.Items[i]
		if len(csr.Status.Conditions) > 0 || !strings.HasPrefix(csr.Name, "nestlet-west-denied-") {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "NotWelcome", Message: "denied by the test"})
		_, err := east.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		require.NoError(t, err)
		found = true
	}
	require.True(t, found, "no pending CSR of west-denied")
	tg = waitReason(t, "west", denied, v1alpha1.ReasonCSRDenied)
	require.Contains(t, launcher.TargetCondition(tg, v1alpha1.ConditionReady).Message, "NotWelcome")
	requireNoNode(t, "east", "west-denied")
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// A child whose API server dies goes NotReady in the parent: once the
// agent's outage tolerance (30 s by default, for restarts; 5 s here) is
// over its Ping fails, so the lease is no longer renewed (LESSONS.md, item
// 3).
func TestDeadChildGoesNotReady(t *testing.T) {
	ctx := t.Context()
	require.NoError(t, env.AddClusters(ctx, launcher.ClusterOptions{Name: "doomed",
		Nodes: []launcher.NodeOptions{node("doomed-1", "north", "north-a", "2", "4Gi")}}))
	doomed := env.Cluster("doomed")
	_, err := env.StartAgent(ctx, doomed, "--apiserver-outage-tolerance=5s")
	require.NoError(t, err)
	_, err = launcher.Join(ctx, env.Cluster("root"), doomed, launcher.JoinOptions{})
	require.NoError(t, err)
	waitNode(t, "root", "doomed", time.Minute, launcher.NodeReady)

	for _, p := range doomed.Processes() {
		if p.Name == "kube-apiserver" {
			p.Stop(5 * time.Second)
		}
	}
	start := time.Now()
	waitNode(t, "root", "doomed", 3*time.Minute, func(n *corev1.Node) bool { return !launcher.NodeReady(n) })
	t.Logf("root saw the dead child NotReady after %s (the agent's 5 s outage tolerance, then the node monitor grace period, 50 s)", time.Since(start).Round(time.Second))
	// The parent's node lifecycle controller then taints it, so its pods
	// are evicted and replaced elsewhere; the parent's agent keeps that taint.
	waitNode(t, "root", "doomed", time.Minute, func(n *corev1.Node) bool { return hasTaint(n, corev1.TaintNodeUnreachable) })
}

// A label the virtual node had when it registered goes away when it no
// longer holds (regression: virtual-kubelet's patches could only remove
// labels they had added themselves).
func TestLabelAtRegistrationCanBeRemoved(t *testing.T) {
	ctx := t.Context()
	good := getTarget(t, "west", targetOf["west"])
	tg := &v1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: "labelled-at-start"}, Spec: *good.Spec.DeepCopy()}
	tg.Spec.ClusterName = "west-labelled"
	tg.Spec.BootstrapTokenSecretRef = joinToken(t, "west", "labelled-token", "--child-name=west-labelled", "--auto-approve")
	tg.Spec.Labels = map[string]string{"example.com/tier": "gold"}
	createTarget(t, "west", tg)
	require.NoError(t, env.Cluster("west").WaitTargetReady(ctx, tg.Name, time.Minute))
	// Written without the finalizer that nestctl join puts on: the agent
	// adds it (the cleanup waits for the agent to remove it).
	require.Contains(t, getTarget(t, "west", tg.Name).Finalizers, api.FinalizerCleanup)
	waitNode(t, "root", "west-labelled", time.Minute, func(n *corev1.Node) bool { return n.Labels["example.com/tier"] == "gold" })

	updateTarget(t, "west", tg.Name, func(tg *v1alpha1.Target) { tg.Spec.Labels = nil })
	waitNode(t, "root", "west-labelled", time.Minute, func(n *corev1.Node) bool {
		_, still := n.Labels["example.com/tier"]
		return !still && n.Labels["topology.kubernetes.io/region"] == "west"
	})
}

// updateTarget changes Target name in cluster with change, again on a
// conflict: its agent writes the Target's status and finalizers meanwhile.
func updateTarget(t *testing.T, cluster, name string, change func(*v1alpha1.Target)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tg := getTarget(t, cluster, name)
		change(tg)
		_, err := targets(t, cluster).Update(t.Context(), tg, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err, "updating Target %s in %s", name, cluster)
}
