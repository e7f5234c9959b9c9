package realleaf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestStatefulSetKeepsItsData: a StatefulSet made at the root with a
// volumeClaimTemplate gets its claim made and Bound at every level (the
// root's and mid's by the agents' nestlet class, the leaf's by its real
// provisioner, local-path-provisioner, on the real node's disk). A file
// its pod writes is read by the pod that replaces it, which goes back to
// the volume's leaf and node. Deleting the claim at the root deletes the
// claims and volumes below, and the directory on the leaf's node.
func TestStatefulSetKeepsItsData(t *testing.T) {
	ns := newNamespace(t)
	root := env.Cluster("root")
	spec := appPodSpec()
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(1)), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
				},
			}},
		},
	}
	_, err := root.Client.AppsV1().StatefulSets(ns).Create(t.Context(), sts, metav1.CreateOptions{})
	require.NoError(t, err)
	first := waitRoot(t, ns, "db-0", "Ready", podReady)
	require.Equal(t, leafNode, leafPod(t, first).Spec.NodeName)

	const claim = "data-db-0"
	classes := map[string]string{"root": api.StorageClassName, "mid": api.StorageClassName, "leaf": launcher.LocalPathClass}
	for _, c := range []string{"root", "mid", "leaf"} {
		framework.Eventually(t, time.Minute, "claim "+claim+" Bound in "+c, func(context.Context) (bool, string) {
			pvc, err := env.Cluster(c).Client.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), claim, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return pvc.Status.Phase == corev1.ClaimBound && ptr.Deref(pvc.Spec.StorageClassName, "") == classes[c],
				string(pvc.Status.Phase) + " class " + ptr.Deref(pvc.Spec.StorageClassName, "")
		})
	}
	mustKubectl(t, "", "-n", ns, "exec", "db-0", "--", "/demo-app", "write", "/data/note", "kept", "in", ns)

	require.NoError(t, root.Client.CoreV1().Pods(ns).Delete(t.Context(), "db-0", metav1.DeleteOptions{}))
	second := waitRoot(t, ns, "db-0", "replaced and Ready", func(p *corev1.Pod) bool { return p.UID != first.UID && podReady(p) })
	require.Equal(t, first.Spec.NodeName, second.Spec.NodeName, "the replacement goes to the volume's child")
	require.Equal(t, leafNode, leafPod(t, second).Spec.NodeName)
	require.Equal(t, "kept in "+ns+"\n", mustKubectl(t, "", "-n", ns, "exec", "db-0", "--", "/demo-app", "cat", "/data/note"))

	// The claim outlives its StatefulSet; deleting it at the root deletes
	// it below, and the data with it (every class reclaims by Delete).
	require.NoError(t, root.Client.AppsV1().StatefulSets(ns).Delete(t.Context(), "db", metav1.DeleteOptions{}))
	framework.Eventually(t, 2*time.Minute, "the StatefulSet's pod gone at the root", func(context.Context) (bool, string) {
		pods, err := root.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprint(len(pods.Items))
	})
	mustKubectl(t, "", "-n", ns, "delete", "pvc", claim, "--wait=false")
	for _, c := range []string{"root", "mid", "leaf"} {
		framework.Eventually(t, 2*time.Minute, "claim "+claim+" and its volume gone in "+c, func(context.Context) (bool, string) {
			_, err := env.Cluster(c).Client.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), claim, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("the claim is there (%v)", err)
			}
			pvs, err := env.Cluster(c).Client.CoreV1().PersistentVolumes().List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, pv := range pvs.Items {
				if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
					return false, "volume " + pv.Name + " is " + string(pv.Status.Phase)
				}
			}
			return true, ""
		})
	}
	framework.Eventually(t, time.Minute, "the volume's directory removed from the leaf's node", func(context.Context) (bool, string) {
		ents, err := os.ReadDir(filepath.Join(env.Cluster("leaf").Dir, "local-path"))
		if err != nil {
			return false, err.Error()
		}
		for _, e := range ents {
			if strings.Contains(e.Name(), ns) {
				return false, e.Name()
			}
		}
		return true, ""
	})
}
