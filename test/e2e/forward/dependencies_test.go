package forward

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/test/framework"
)

var allClusters = []string{"root", "east", "west", "east-1", "east-2", "west-1", "west-2"}

// A ConfigMap and a Secret used through env, envFrom and a volume reach the
// leaves, an update of the ConfigMap reaches them too, and once the
// Deployment is gone no pod and no copy is left at any level.
func TestDependenciesFollowPods(t *testing.T) {
	ctx := t.Context()
	ns := framework.KeptNamespace(t, env.Cluster("root").Client, "t")
	root := env.Cluster("root")
	_, err := root.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app-config"}, Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "app-secret"}, StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	dep := deployment(ns, "configured", 4, "west")
	spec := &dep.Spec.Template.Spec
	spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "greeting"}}}}
	spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}}}}
	spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}
	_, err = root.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPods(t, "root", ns, "app=configured", 2*time.Minute, func(ps []corev1.Pod) bool { return countRunning(ps) == 4 })

	// Every cluster that runs a delegate has the copies.
	var holders []string
	for _, c := range []string{"west", "west-1", "west-2"} {
		if len(delegates(t, c, ns)) == 0 {
			continue
		}
		holders = append(holders, c)
		cm, err := env.Cluster(c).Client.CoreV1().ConfigMaps(ns).Get(ctx, "app-config", metav1.GetOptions{})
		require.NoError(t, err, "ConfigMap copy in %s", c)
		require.Equal(t, "hello", cm.Data["greeting"])
		sec, err := env.Cluster(c).Client.CoreV1().Secrets(ns).Get(ctx, "app-secret", metav1.GetOptions{})
		require.NoError(t, err, "Secret copy in %s", c)
		require.Equal(t, "s3cret", string(sec.Data["password"]))
	}
	require.Contains(t, holders, "west")
	require.Len(t, holders, 1+len(holders[1:]))
	require.GreaterOrEqual(t, len(holders), 2, "at least one leaf holds copies")

	// An update in the root reaches every level.
	cm, err := root.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app-config", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["greeting"] = "bonjour"
	_, err = root.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	for _, c := range holders {
		framework.EventuallyEvery(t, 100*time.Millisecond, time.Minute, "the update reaches "+c, func(ctx context.Context) (bool, string) {
			cm, err := env.Cluster(c).Client.CoreV1().ConfigMaps(ns).Get(ctx, "app-config", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return cm.Data["greeting"] == "bonjour", fmt.Sprintf("greeting %q", cm.Data["greeting"])
		})
	}

	// Deleting the Deployment leaves nothing behind at any level.
	require.NoError(t, root.Client.AppsV1().Deployments(ns).Delete(ctx, "configured", metav1.DeleteOptions{}))
	for _, c := range allClusters {
		waitPods(t, c, ns, "app=configured", 2*time.Minute, func(ps []corev1.Pod) bool { return len(ps) == 0 })
	}
	for _, c := range holders {
		framework.Eventually(t, time.Minute, "no copy left in "+c, func(ctx context.Context) (bool, string) {
			sel := metav1.ListOptions{LabelSelector: api.LabelTargetUID}
			cms, err := env.Cluster(c).Client.CoreV1().ConfigMaps(ns).List(ctx, sel)
			if err != nil {
				return false, err.Error()
			}
			secs, err := env.Cluster(c).Client.CoreV1().Secrets(ns).List(ctx, sel)
			if err != nil {
				return false, err.Error()
			}
			return len(cms.Items) == 0 && len(secs.Items) == 0, fmt.Sprintf("%d ConfigMaps, %d Secrets", len(cms.Items), len(secs.Items))
		})
	}
}
