package revoked

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/api"
)

// The revoked names follow the ConfigMap's keys, and each change is told.
func TestWatcherFollowsTheConfigMap(t *testing.T) {
	client := fake.NewClientset()
	changes := make(chan map[string]bool, 10)
	w := New(client, func(names map[string]bool) { changes <- names })
	go w.Run(t.Context())
	next := func() map[string]bool {
		t.Helper()
		select {
		case n := <-changes:
			return n
		case <-time.After(5 * time.Second):
			t.Fatal("no change told")
			return nil
		}
	}
	// A fake clientset drops what happens between an informer's list and
	// its watch: wait for the watch.
	require.Eventually(t, func() bool {
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" && a.GetResource().Resource == "configmaps" {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "the ConfigMap is watched")
	cms := client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: api.RevokedConfigMap, Namespace: "kube-system"},
		Data: map[string]string{"east": "2026-11-25T12:00:00Z"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"east": true}, next())
	require.True(t, w.Has("east"))
	require.False(t, w.Has("west"))

	cm.Data = map[string]string{"west": "2026-11-25T12:01:00Z"}
	_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"west": true}, next())
	require.False(t, w.Has("east"), "lifted")

	require.NoError(t, cms.Delete(t.Context(), api.RevokedConfigMap, metav1.DeleteOptions{}))
	require.Empty(t, next())
	require.False(t, (*Watcher)(nil).Has("west"))
}
