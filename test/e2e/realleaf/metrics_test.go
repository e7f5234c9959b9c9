package realleaf

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/test/framework"
)

// TestTopAndAutoscaling: the root runs metrics-server, which reads the
// virtual node's /metrics/resource like any kubelet's. `kubectl top pod`
// at the root shows the CPU and memory of a container two levels down,
// `kubectl top node` the virtual node's (its subtree's nodes), and
// a HorizontalPodAutoscaler made at the root scales a Deployment from 1 to
// 3 replicas on the leaf containers' CPU while a load generator pod runs,
// and back to 1 once it is gone.
func TestTopAndAutoscaling(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	// mid is behind the root's nestlet-proxy, on a port of its own there.
	framework.Eventually(t, time.Minute, "mid advertises its own port on the root's proxy", func(context.Context) (bool, string) {
		ports, err := root.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "nestlet-proxy-ports", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n, err := root.CoreV1().Nodes().Get(ctx, "mid", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		port := strconv.Itoa(int(n.Status.DaemonEndpoints.KubeletEndpoint.Port))
		return ports.Data["mid"] == port, fmt.Sprintf("mid advertises port %s; the proxy's ports: %v", port, ports.Data)
	})
	labels := map[string]string{"app": "busy"}
	spec := appPodSpec()
	spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
	_, err := root.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// kubectl top at the root: the container's CPU and memory.
	line := regexp.MustCompile(`(?m)^busy-\S+\s+\d+m\s+\d+Mi\s*$`)
	framework.Eventually(t, 2*time.Minute, "kubectl top pod at the root shows busy's CPU and memory", func(context.Context) (bool, string) {
		out, errOut, err := kubectl(ctx, "", "-n", ns, "top", "pod")
		return err == nil && line.MatchString(out), fmt.Sprintf("%q %q %v", out, errOut, err)
	})

	// And the virtual node's own figures, its subtree's nodes added up.
	nodeLine := regexp.MustCompile(`(?m)^mid\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%\s*$`)
	framework.Eventually(t, time.Minute, "kubectl top node at the root shows the virtual node mid", func(context.Context) (bool, string) {
		out, errOut, err := kubectl(ctx, "", "top", "node", "mid")
		return err == nil && nodeLine.MatchString(out), fmt.Sprintf("%q %q %v", out, errOut, err)
	})

	// 50% of 10m; scaling without the default stabilization windows.
	fast := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), Policies: []autoscalingv2.HPAScalingPolicy{
		{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 5}}}
	_, err = root.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "busy"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "busy"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
			}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: fast, ScaleDown: fast},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	replicas := func(want int32) func(context.Context) (bool, string) {
		return func(context.Context) (bool, string) {
			d, err := root.AppsV1().Deployments(ns).Get(ctx, "busy", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			h, herr := root.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "busy", metav1.GetOptions{})
			hpa := fmt.Sprint(herr)
			if herr == nil {
				hpa = fmt.Sprintf("current %d desired %d, metrics %+v, conditions %+v", h.Status.CurrentReplicas, h.Status.DesiredReplicas, h.Status.CurrentMetrics, h.Status.Conditions)
			}
			return *d.Spec.Replicas == want && d.Status.ReadyReplicas == want,
				fmt.Sprintf("deployment wants %d, %d ready; hpa: %s", *d.Spec.Replicas, d.Status.ReadyReplicas, hpa)
		}
	}
	// The load: requests burning 20 ms of CPU each, 100 ms apart.
	load := appPod("load", "load", "http://busy/burn/20")
	load.Spec.Containers[0].Args = nil
	load.Spec.Containers[0].Command = []string{"/demo-app", "load", "http://busy/burn/20"}
	load.Spec.Containers[0].ReadinessProbe = nil
	load.Spec.Containers[0].Ports = nil
	createAt(t, ns, load)
	framework.Eventually(t, 3*time.Minute, "busy scaled to 3 under load", replicas(3))
	require.NoError(t, root.CoreV1().Pods(ns).Delete(ctx, "load", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	framework.Eventually(t, 3*time.Minute, "busy back to 1 without load", replicas(1))
}
