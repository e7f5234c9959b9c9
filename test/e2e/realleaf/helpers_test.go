package realleaf

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// newNamespace creates a namespace of its own for the test at the root
// (framework.KeptNamespace), on a machine that runs real nodes.
func newNamespace(t *testing.T) string {
	t.Helper()
	framework.NeedRealNodes(t)
	return framework.KeptNamespace(t, env.Cluster("root").Client, "t")
}

// appPod is a pod of the demo app for the real region, with a readiness
// probe on /healthz.
func appPod(name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec:       appPodSpec(args...),
	}
}

func appPodSpec(args ...string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector:                  map[string]string{"topology.kubernetes.io/region": region},
		TerminationGracePeriodSeconds: ptr.To(int64(2)),
		Containers: []corev1.Container{{
			Name:            "app",
			Image:           launcher.DemoAppImage,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Args:            args,
			Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrPort(8080)}},
				PeriodSeconds: 1,
			},
		}},
	}
}

// createAt creates pod in ns at the root.
func createAt(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	_, err := env.Cluster("root").Client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

// waitRoot waits until the root's pod ns/name satisfies ok and returns it.
func waitRoot(t *testing.T, ns, name, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("pod %s/%s at the root: waiting for %s", ns, name, what), func(ctx context.Context) (bool, string) {
		p, err := env.Cluster("root").Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = p
		return ok(p), fmt.Sprintf("status %+v", p.Status)
	})
	return last
}

// podReady reports whether the pod has condition Ready=True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// leafPod follows the delegates of the root's pod down to the leaf and
// returns the leaf's pod.
func leafPod(t *testing.T, rootPod *corev1.Pod) *corev1.Pod {
	t.Helper()
	cluster, uid, ns := rootPod.Spec.NodeName, string(rootPod.UID), rootPod.Namespace
	for range 5 {
		c := env.Cluster(cluster)
		require.NotNil(t, c, "pod bound to %q, not a cluster of the tree", cluster)
		list, err := c.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		var next *corev1.Pod
		for i := range list.Items {
			if strings.HasSuffix(list.Items[i].Annotations[api.AnnotationOrigin], "/"+uid) {
				next = &list.Items[i]
			}
		}
		require.NotNil(t, next, "no delegate of %s in %s", uid, cluster)
		if env.Cluster(next.Spec.NodeName) == nil {
			require.Equal(t, "leaf", cluster, "the pod runs in %s", cluster)
			return next
		}
		cluster, uid = next.Spec.NodeName, string(next.UID)
	}
	t.Fatalf("delegate chain of %s/%s deeper than 5", ns, rootPod.Name)
	return nil
}

// kubectl runs kubectl against the root and returns stdout, stderr and the
// error.
func kubectl(ctx context.Context, stdin string, args ...string) (string, string, error) {
	return framework.Kubectl(ctx, env, env.Cluster("root"), stdin, args...)
}

// mustKubectl is kubectl that fails the test on error.
func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kubectl(t.Context(), stdin, args...)
	require.NoError(t, err, "kubectl %s at the root: %s", strings.Join(args, " "), errOut)
	return out
}

// realNode is the leaf's real node.
func realNode() *launcher.RealNode { return env.Cluster("leaf").RealNode(leafNode) }

// tokenDir is where a pod reads its service account token and CA.
const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// withToken gives pod a service account token of the given lifetime (its
// own projected volume, with the CA, in place of the 1-hour one admission
// adds) and returns it.
func withToken(pod *corev1.Pod, seconds int64) *corev1.Pod {
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	pod.Spec.Volumes = []corev1.Volume{{Name: "api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(seconds)}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
	}}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "api", MountPath: tokenDir, ReadOnly: true}}
	return pod
}
