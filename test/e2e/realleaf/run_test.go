package realleaf

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nestlet/nestlet/test/framework"
)

func intstrPort(p int) intstr.IntOrString { return intstr.FromInt(p) }

// TestRunsForReal: a pod of the demo app created at the root runs as a
// container in the leaf, is Running at the root with the IP the leaf's CNI
// gave it, Ready only once its readiness probe passed in the leaf, and
// answers HTTP on that IP; the request shows in its logs at the root.
func TestRunsForReal(t *testing.T) {
	ns := newNamespace(t)
	// The probe fails for the first 3 s of the container.
	createAt(t, ns, appPod("app", "--ready-after=3s"))
	root := waitRoot(t, ns, "app", "Ready", podReady)
	leaf := leafPod(t, root)
	require.Equal(t, leafNode, leaf.Spec.NodeName)

	// Ready at the root only after the probe passed in the leaf.
	require.Len(t, root.Status.ContainerStatuses, 1)
	started := root.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	ready := conditionTime(root, corev1.PodReady)
	require.GreaterOrEqual(t, ready.Sub(started), 2*time.Second, "Ready at %s, container started at %s", ready, started)

	// The IP is the leaf CNI's, the same at the root.
	node := realNode()
	ip := netip.MustParseAddr(root.Status.PodIP)
	require.True(t, netip.MustParsePrefix(node.PodCIDR).Contains(ip), "pod IP %s outside the node's pod CIDR %s", ip, node.PodCIDR)
	require.Equal(t, leaf.Status.PodIP, root.Status.PodIP)

	// The app answers on its IP, from the node.
	resp, err := node.HTTPClient().Get(fmt.Sprintf("http://%s:8080/from-test", ip))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(body), "hello from app")

	framework.Eventually(t, 30*time.Second, "the request in the logs at the root", func(context.Context) (bool, string) {
		out, errOut, err := kubectl(t.Context(), "", "-n", ns, "logs", "app")
		return err == nil && strings.Contains(out, "GET /from-test"), fmt.Sprintf("%q %q %v", out, errOut, err)
	})

	// The runtime runs it: one running container of the pod, the app's.
	containers, err := node.Containers(t.Context())
	require.NoError(t, err)
	var running []string
	for _, c := range containers {
		if c.Labels["io.kubernetes.pod.namespace"] == ns && c.State.String() == "CONTAINER_RUNNING" {
			running = append(running, c.Metadata.Name+" "+c.Image.GetUserSpecifiedImage())
		}
	}
	require.Equal(t, []string{"app nestlet.local/demo-app:v1"}, running)
}

// conditionTime returns when the pod's condition of type last changed.
func conditionTime(p *corev1.Pod, kind corev1.PodConditionType) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == kind {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
