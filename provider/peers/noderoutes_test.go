package peers

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/provider/noderoutes"
)

// The gateway's node is published at start, then with each change of the
// routes; a ConfigMap left by an agent on another node is taken over. The
// agent fills in the chart's ConfigMap and makes none: it waits for one.
func TestNodeRoutesPublished(t *testing.T) {
	client := fake.NewClientset()
	require.ErrorContains(t, newNodeRoutes(client, "nestlet-system", "node-a").write(t.Context(), map[string]string{}),
		"the chart makes it")
	_, err := client.CoreV1().ConfigMaps("nestlet-system").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: noderoutes.ConfigMapName, Labels: map[string]string{"app.kubernetes.io/part-of": "nestlet"}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := newNodeRoutes(client, "nestlet-system", "node-a")
	n.set(nil)
	done := make(chan struct{})
	go func() { n.run(ctx); close(done) }()
	waitData := func(want map[string]string) {
		t.Helper()
		var last map[string]string
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			cm, err := client.CoreV1().ConfigMaps("nestlet-system").Get(ctx, noderoutes.ConfigMapName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = cm.Data
			return len(last) == len(want) && last[noderoutes.KeyNode] == want[noderoutes.KeyNode] && last[noderoutes.KeyRoutes] == want[noderoutes.KeyRoutes], nil
		})
		require.NoError(t, err, "published %v, want %v", last, want)
	}
	waitData(map[string]string{noderoutes.KeyNode: "node-a", noderoutes.KeyRoutes: ""})
	n.set([]netip.Prefix{netip.MustParsePrefix("10.3.0.0/16"), netip.MustParsePrefix("10.1.0.0/24")})
	waitData(map[string]string{noderoutes.KeyNode: "node-a", noderoutes.KeyRoutes: "10.1.0.0/24,10.3.0.0/16"})

	// Another replica, elected on node-b, writes its own node.
	other := newNodeRoutes(client, "nestlet-system", "node-b")
	other.set([]netip.Prefix{netip.MustParsePrefix("10.3.0.0/16")})
	cancel()
	<-done
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	go other.run(ctx)
	waitData(map[string]string{noderoutes.KeyNode: "node-b", noderoutes.KeyRoutes: "10.3.0.0/16"})
}
