package install

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// chartScheduler is the chart's scheduler's name: it runs beside the stock
// kube-scheduler, which stays the clusters' default scheduler.
const chartScheduler = "nestlet-scheduler"

// newNamespace creates a namespace of its own for the test at the root
// (framework.KeptNamespace), on a machine that runs real nodes.
func newNamespace(t testing.TB) string {
	t.Helper()
	framework.NeedRealNodes(t)
	return framework.KeptNamespace(t, env.Cluster("root").Client, "t")
}

// webDeployment creates at the root a Deployment of the demo app with a
// region nodeSelector, through the chart's scheduler, and waits until its
// replicas are ready there.
func webDeployment(t testing.TB, ns, name string, replicas int32, opts ...func(*appsv1.Deployment)) []corev1.Pod {
	t.Helper()
	root := env.Cluster("root").Client
	sel := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{
					SchedulerName:                 chartScheduler,
					NodeSelector:                  map[string]string{"topology.kubernetes.io/region": region},
					TerminationGracePeriodSeconds: ptr.To(int64(2)),
					Containers: []corev1.Container{{
						Name: "app", Image: launcher.DemoAppImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						// Probes with room for a busy machine: a probe
						// timing out under load is not Nestlet's doing.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds:  2,
							TimeoutSeconds: 10,
						},
					}},
				},
			},
		},
	}
	for _, o := range opts {
		o(d)
	}
	_, err := root.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	var pods []corev1.Pod
	framework.EventuallyEvery(t, time.Second, 5*time.Minute, fmt.Sprintf("deployment %s at the root: %d ready replicas", name, replicas), func(ctx context.Context) (bool, string) {
		d, err := root.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		list, err := root.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.FormatLabels(sel)})
		if err != nil {
			return false, err.Error()
		}
		if d.Status.ReadyReplicas != replicas {
			return false, fmt.Sprintf("%d ready; pods: %s", d.Status.ReadyReplicas, framework.DescribePods(list.Items))
		}
		pods = list.Items
		return len(pods) == int(replicas), fmt.Sprintf("%d pods", len(pods))
	})
	return pods
}

// TestDeploymentByRegion: a Deployment with a region nodeSelector made at
// the root runs in east-1, two levels down: every replica is bound to
// east's virtual node at the root, its delegate in east to east-1's, and
// the delegate's delegate runs in east-1 on the real node, as a real
// container.
func TestDeploymentByRegion(t *testing.T) {
	ns := newNamespace(t)
	pods := webDeployment(t, ns, "web", 2)
	east, leaf := env.Cluster("east"), env.Cluster("east-1")
	for _, p := range pods {
		require.Equal(t, "east", p.Spec.NodeName, "pod %s", p.Name)
		mid := delegateIn(t, east, &p)
		require.Equal(t, "east-1", mid.Spec.NodeName, "delegate of %s in east", p.Name)
		delegate := delegateIn(t, leaf, mid)
		require.Equal(t, leafNode, delegate.Spec.NodeName)
		require.Equal(t, corev1.PodRunning, delegate.Status.Phase)
		require.Equal(t, delegate.Status.PodIP, p.Status.PodIP, "the root shows the address east-1's network gave the pod")
	}
	require.Len(t, appContainers(t, ns, "web-"), 2, "containers of the deployment in east-1's runtime")
}

// delegateIn returns c's delegate of the pod.
func delegateIn(t testing.TB, c *launcher.Cluster, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(p.Namespace).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range list.Items {
		if strings.HasSuffix(list.Items[i].Annotations[api.AnnotationOrigin], "/"+string(p.UID)) {
			return &list.Items[i]
		}
	}
	t.Fatalf("no delegate of %s/%s in %s", p.Namespace, p.Name, c.Name)
	return nil
}

// TestKubectlThroughTheProxy: `kubectl logs`, `exec` and `port-forward` at
// the root reach a pod in east-1 through the proxies of the root and east,
// installed by the chart and published by a NodePort, and the tunnels the
// children's agents opened from behind NAT.
func TestKubectlThroughTheProxy(t *testing.T) {
	ns := newNamespace(t)
	pod := webDeployment(t, ns, "web", 1)[0]
	root := env.Cluster("root")
	logs, errOut, err := framework.Kubectl(t.Context(), env, root, "", "-n", ns, "logs", pod.Name)
	require.NoError(t, err, errOut)
	require.Contains(t, logs, "demo-app: listening on :8080")

	out, errOut, err := framework.Kubectl(t.Context(), env, root, "", "-n", ns, "exec", pod.Name, "--", "/demo-app", "echo", "through", "the", "proxy")
	require.NoError(t, err, errOut)
	require.Equal(t, "through the proxy\n", out)

	// The pod's virtual node advertises a port of the chart's
	// proxy.nodePorts, where the node-level routes are served too.
	at, err := root.Client.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	node, err := root.Client.CoreV1().Nodes().Get(t.Context(), at.Spec.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	require.True(t, port >= firstNodePort && port < firstNodePort+nodePorts, "node %s advertises port %d", node.Name, port)
	raw, err := root.Client.CoreV1().RESTClient().Get().Resource("nodes").Name(node.Name).SubResource("proxy").Suffix("stats/summary").DoRaw(t.Context())
	require.NoError(t, err, "stats/summary of %s at the root: %s", node.Name, raw)
	var sum statsv1alpha1.Summary
	require.NoError(t, json.Unmarshal(raw, &sum), "%s", raw)
	require.Equal(t, node.Name, sum.Node.NodeName)

	// logs -f: the port-forwarded request's line arrives on the open
	// stream.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	follow := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", root.KubeconfigPath, "-n", ns, "logs", "-f", "--tail=1", pod.Name)
	stdout, err := follow.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, follow.Start())
	defer func() { cancel(); _ = follow.Wait() }()
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "logs -f: no first line")
	require.Contains(t, framework.PortForwardGet(t, env, root, ns, "pod/"+pod.Name, "8080", "/through-port-forward"), "hello from")
	for lines.Scan() {
		if strings.Contains(lines.Text(), "GET /through-port-forward") {
			return
		}
	}
	t.Fatalf("logs -f ended before the request's line: %v", lines.Err())
}

// TestComponentsNeverRefused: after the tests above, no log line of any
// Nestlet pod in any cluster says the API server refused it something:
// the chart's identities were enough for all the work the tests made
// (TestRBACLeastPrivilege in test/e2e/chart shows they are no more).
func TestComponentsNeverRefused(t *testing.T) {
	newNamespace(t)
	for _, c := range env.Clusters() {
		pods, err := c.Client.CoreV1().Pods(chartNamespace).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items, c.Name)
		for _, p := range pods.Items {
			out, errOut, err := framework.Kubectl(t.Context(), env, c, "", "-n", chartNamespace, "logs", p.Name, "--all-containers")
			require.NoError(t, err, errOut)
			for _, line := range strings.Split(out, "\n") {
				lower := strings.ToLower(line)
				require.False(t, strings.Contains(lower, "forbidden") || strings.Contains(lower, "cannot list") || strings.Contains(lower, "cannot get"),
					"%s: pod %s was refused: %s", c.Name, p.Name, line)
			}
		}
	}
}

// TestUninstall (last: east-1 leaves the tree): once the workloads are
// gone, `helm uninstall` in east-1 first has the cluster leave its parent
// (the chart's pre-delete hook runs nestctl leave), so that when it
// returns east-1's virtual node is gone from east and east's summary no
// longer offers region east to the root; nothing of Nestlet's is left in
// east-1 but the CRD (and the release namespace helm made, as helm leaves
// it), nor on its node (the route agents' interface and table).
func TestUninstall(t *testing.T) {
	newNamespace(t)
	ctx := t.Context()
	root, east, leaf := env.Cluster("root"), env.Cluster("east"), env.Cluster("east-1")
	nss, err := root.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nss.Items {
		// The tests' namespaces, but those already going (the tests
		// that made theirs with framework.Namespace deleted them).
		if strings.HasPrefix(n.Name, "t-") && n.DeletionTimestamp == nil {
			require.NoError(t, root.Client.CoreV1().Namespaces().Delete(ctx, n.Name, metav1.DeleteOptions{}))
		}
	}
	framework.EventuallyEvery(t, time.Second, 3*time.Minute, "the delegates in east-1 of the deleted workloads gone", func(ctx context.Context) (bool, string) {
		pods, err := leaf.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: api.LabelTargetUID})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d delegates", len(pods.Items))
	})

	for _, n := range leaf.RealNodes() {
		vxlanOnNode(t, n, false) // there before
	}
	_, err = framework.Helm(ctx, env, leaf, "uninstall", release, "--namespace", chartNamespace, "--wait", "--timeout", "3m")
	require.NoError(t, err)
	_, err = east.Client.CoreV1().Nodes().Get(ctx, "east-1", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "east-1's virtual node in east after the uninstall: %v", err)

	targets, err := v1alpha1.NewTargetClient(leaf.Config)
	require.NoError(t, err)
	list, err := targets.List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the CRD stays")
	require.Empty(t, list.Items)
	// The Deployments are gone; their pods follow (garbage collection).
	framework.EventuallyEvery(t, time.Second, 2*time.Minute, "Nestlet's pods in east-1 gone after the uninstall", func(ctx context.Context) (bool, string) {
		pods, err := leaf.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	// The route agents removed the node's interface and table as they
	// exited: their DaemonSet was gone.
	for _, n := range leaf.RealNodes() {
		noRoutesOnNode(t, n)
	}
	var left []string
	for _, check := range []func() ([]string, error){
		func() ([]string, error) {
			return names(leaf.Client.CoreV1().Secrets(chartNamespace).List(ctx, metav1.ListOptions{}))
		},
		func() ([]string, error) {
			return names(leaf.Client.CoreV1().ConfigMaps(chartNamespace).List(ctx, metav1.ListOptions{}))
		},
		func() ([]string, error) {
			return names(leaf.Client.CoreV1().ServiceAccounts(chartNamespace).List(ctx, metav1.ListOptions{}))
		},
		func() ([]string, error) {
			return names(leaf.Client.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=nestlet"}))
		},
		func() ([]string, error) {
			return names(leaf.Client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=nestlet"}))
		},
		func() ([]string, error) {
			return names(leaf.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{}))
		},
	} {
		l, err := check()
		require.NoError(t, err)
		left = append(left, l...)
	}
	// What every namespace holds anyway: its default ServiceAccount and
	// the cluster's CA bundle.
	require.ElementsMatch(t, []string{"default", "kube-root-ca.crt"}, left, "Nestlet's objects left in east-1")
}

// names returns the names of a list's items.
func names(list runtime.Object, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range items {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, m.GetName())
	}
	return out, nil
}
