package realleaf

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/test/framework"
)

// TestClientInLeafReachesServiceByClusterIP: a Service and a Deployment made
// at the root, and a client pod made at the root after them. In the leaf,
// the client learns the Service as any pod does (the kubelet's
// WEB_SERVICE_HOST, the ClusterIP of the leaf's own copy: the root's
// address, free in the leaf), and reaches the replicas through it: the
// leaf's kube-proxy balances the copy's ClusterIP over the leaf's pods.
func TestClientInLeafReachesServiceByClusterIP(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	rootSvc := webAtRoot(t, ns, 2)

	leaf := env.Cluster("leaf").Client
	var copyIP string
	framework.Eventually(t, 2*time.Minute, "web's copy in the leaf with 2 ready endpoints", func(context.Context) (bool, string) {
		svc, err := leaf.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		copyIP = svc.Spec.ClusterIP
		pods, err := leaf.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready == 2, fmt.Sprintf("%d of web's pods Ready in the leaf", ready)
	})
	// The copy has the root's address unless a Service of the leaf
	// already held it (then the leaf allocates one).
	if copyIP != rootSvc.Spec.ClusterIP {
		all, err := leaf.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		holder := ""
		for _, s := range all.Items {
			if s.Spec.ClusterIP == rootSvc.Spec.ClusterIP {
				holder = s.Namespace + "/" + s.Name
			}
		}
		require.NotEmpty(t, holder, "the copy's address %s is not the root's %s, which no Service of the leaf holds", copyIP, rootSvc.Spec.ClusterIP)
	}

	createAt(t, ns, appPod("client"))
	waitRoot(t, ns, "client", "Ready", podReady)
	envOut := mustKubectl(t, "", "-n", ns, "exec", "client", "--", "/demo-app", "env")
	require.Contains(t, envOut, "WEB_SERVICE_HOST="+copyIP+"\n", "the leaf's kubelet told the client the copy's ClusterIP")

	webPods, err := leaf.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	answers := map[string]bool{}
	for _, p := range webPods.Items {
		answers["hello from "+p.Name+"\n"] = true
	}
	seen := map[string]bool{}
	for range 10 {
		out := mustKubectl(t, "", "-n", ns, "exec", "client", "--", "/demo-app", "get", "http://"+copyIP+":80/from-client")
		require.True(t, answers[out], "the answer %q comes from none of web's pods %v", out, answers)
		seen[out] = true
	}
	t.Logf("10 requests to %s:80 answered by %d of web's 2 pods", copyIP, len(seen))
}

// webAtRoot makes, at the root, a Deployment "web" of the demo app with
// replicas pods and a Service "web" on port 80 to their http port; it
// returns the Service.
func webAtRoot(t *testing.T, ns string, replicas int32) *corev1.Service {
	t.Helper()
	ctx := t.Context()
	root := env.Cluster("root").Client
	labels := map[string]string{"app": "web"}
	_, err := root.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: appPodSpec()}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	svc, err := root.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return svc
}

// TestClientInLeafResolvesNames: the leaf runs cluster DNS as any cluster
// does, so a client pod made at the root and running in the leaf resolves
// the leaf's own names (the copy of a Service made at the root, by its
// full name and by the short name of its search path) and reaches the
// replicas by name; the API server's name is the root's, whose token the
// pod holds.
func TestClientInLeafResolvesNames(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	leafCluster := env.Cluster("leaf")
	require.NoError(t, leafCluster.WaitClusterDNS(ctx, 2*time.Minute))
	webAtRoot(t, ns, 1)
	leaf := leafCluster.Client
	var copyIP string
	framework.Eventually(t, 2*time.Minute, "web's copy in the leaf", func(context.Context) (bool, string) {
		svc, err := leaf.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		copyIP = svc.Spec.ClusterIP
		return true, ""
	})

	createAt(t, ns, appPod("client"))
	waitRoot(t, ns, "client", "Ready", podReady)
	resolve := func(name string) string {
		return mustKubectl(t, "", "-n", ns, "exec", "client", "--", "/demo-app", "resolve", name)
	}
	// The agents run with --pod-api=origin: the API server's name is the
	// cluster's the pod was made in, the root's relay through the tunnels.
	require.Equal(t, env.Cluster("root").Host.APIAddress()+"\n", resolve("kubernetes.default.svc.cluster.local"), "the root's API server")
	require.Equal(t, copyIP+"\n", resolve("web."+ns+".svc.cluster.local"), "the leaf's copy of web, by its full name")
	require.Equal(t, copyIP+"\n", resolve("web"), "the leaf's copy of web, by the short name")

	var webPod string
	framework.Eventually(t, 2*time.Minute, "web's pod Ready in the leaf", func(context.Context) (bool, string) {
		pods, err := leaf.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				webPod = pods.Items[i].Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d of web's pods, none Ready", len(pods.Items))
	})
	framework.Eventually(t, time.Minute, "web answers by name", func(context.Context) (bool, string) {
		out, errOut, err := kubectl(ctx, "", "-n", ns, "exec", "client", "--", "/demo-app", "get", "http://web/by-name")
		return err == nil && out == "hello from "+webPod+"\n", fmt.Sprintf("%q %q %v", out, errOut, err)
	})
}
