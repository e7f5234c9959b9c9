package kubelet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/launcher"
)

// A parent's nestlet-proxy restarted on other ports with a new self-signed
// certificate: the child's agent notices what the parent now publishes,
// dials the new proxy, its virtual node advertises the new endpoint, and
// exec from the root works again, with no action on the child.
func TestProxyRestartedElsewhere(t *testing.T) {
	ns, _, _ := runPod(t, "east")
	before := kubeletEndpoint(t, "root", "east")

	var old *launcher.Process
	for _, p := range env.Processes() {
		if p.Name == "root-nestlet-proxy" && p.Alive() {
			old = p
		}
	}
	require.NotNil(t, old, "root's proxy")
	old.Stop(10 * time.Second)
	_, err := env.StartProxy(t.Context(), env.Cluster("root"))
	require.NoError(t, err)

	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if kubeletEndpoint(t, "root", "east") == before {
			return false, nil
		}
		out, _, err := kubectl(ctx, "root", "", "exec", "-n", ns, "app", "--", "echo", "again")
		return err == nil && out == "again\n", nil
	})
	require.NoError(t, err, "exec through the restarted proxy")
}
