package install

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/test/framework"
)

// previousRelease stands for the release before this one: the last commit
// before the builds stated their version and protocols (api/protocol.go).
// Its agent states nothing of itself on its node in the parent, nor of
// itself as a parent on its children's nodes, and reads nothing of the
// other side, as every build before it; it is read as protocol 1.
const previousRelease = "47a2b1a"

// TestPreviousReleaseBothWays: east rolled back to the previous release
// with helm (its chart and its image, built from that commit's sources)
// while pods run below it, so that an old agent has a new parent (east
// under the root) and a new agent an old parent (east-1 under east). Both
// meet: no skew taint on either virtual node, east-1's Target Compatible
// and saying its parent states no version, a new Deployment at the root
// runs in east-1 through the old east, and `kubectl logs` at the root
// reaches it through east's old proxy. East then goes back to this build;
// both sides state it again, and no pod at the root was disturbed through
// the rollback and the upgrade.
func TestPreviousReleaseBothWays(t *testing.T) {
	ns := newNamespace(t)
	root, east := env.Cluster("root"), env.Cluster("east")
	webDeployment(t, ns, "steady", 3)
	atRoot := watchStates(t, root.Client, ns, "app=steady")

	old, err := framework.BuildImageAt(t.TempDir(), previousRelease, "NESTLET_VERSION=0.0.0-"+previousRelease)
	require.NoError(t, err)
	for _, n := range east.RealNodes() {
		require.NoError(t, n.ImportImages(t.Context(), map[string]string{old.Ref: old.Archive}))
	}
	current, err := chartPath()
	require.NoError(t, err)
	restored := false
	t.Cleanup(func() {
		if !restored { // the later tests need east on this build
			setRelease(t, "east", current, image)
		}
	})
	setRelease(t, "east", filepath.Join(old.Source, "charts", "nestlet"), old)

	// The previous release never wrote these; this build's statements,
	// left from before the rollback, are taken off as docs/upgrade.md
	// says to after a rollback to it.
	unstate(t, "root", "east", api.AnnotationAgentVersion, api.AnnotationProtocols)
	unstate(t, "east", "east-1", api.AnnotationParentVersion, api.AnnotationParentProtocols)
	requireCompatible(t, "east-1", "east", "does not state its version", image.Tag())
	for _, vn := range []struct{ parent, child string }{{"root", "east"}, {"east", "east-1"}} {
		n, err := env.Cluster(vn.parent).Client.CoreV1().Nodes().Get(t.Context(), vn.child, metav1.GetOptions{})
		require.NoError(t, err)
		for _, taint := range n.Spec.Taints {
			require.NotEqual(t, api.TaintKeyVersionSkew, taint.Key, "%s in %s: %v", vn.child, vn.parent, n.Spec.Taints)
		}
	}

	// The previous release's proxy gives no node a port of its own:
	// east-1's agent advertises the shared port once it asks one of the
	// old replicas, when its tunnel comes up again or at its next periodic
	// ask (until then its node keeps the port the new proxy gave it, where
	// nothing listens any more).
	waitKubeletPort(t, "east", "east-1", func(port int32) bool { return port == kubeletNodePort })

	pod := webDeployment(t, ns, "across", 2)[0]
	mid := delegateIn(t, east, &pod)
	delegateIn(t, env.Cluster("east-1"), mid)
	// The old replicas learn each other's tunnels over their peer
	// connections, and the port check above says only that east-1's agent
	// reached one of them: until the replica the API server's request
	// lands on knows of east-1's tunnel, it answers 502 naming the node.
	framework.EventuallyEvery(t, 2*time.Second, time.Minute, "kubectl logs at the root through east's old proxy", func(ctx context.Context) (bool, string) {
		logs, errOut, err := framework.Kubectl(ctx, env, root, "", "-n", ns, "logs", pod.Name)
		if err != nil {
			return false, errOut
		}
		return strings.Contains(logs, "demo-app: listening on :8080"), logs
	})

	setRelease(t, "east", current, image)
	restored = true
	requireVersionsStated(t, "east", "root", image.Tag())
	requireVersionsStated(t, "east-1", "east", image.Tag())
	waitKubeletPort(t, "east", "east-1", func(port int32) bool { return port >= firstNodePort && port < firstNodePort+nodePorts })
	require.Empty(t, atRoot(t), "pods at the root disturbed by the rollback of east and its upgrade back")
}

// setRelease `helm upgrade`s cluster to chart with img, waits until
// Nestlet's pods all run it, and until the cluster's Targets (to its
// parent, and its children's to it) are Ready again.
func setRelease(t *testing.T, cluster, chart string, img framework.Image) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context()) // also from a cleanup
	c := env.Cluster(cluster)
	out, err := framework.Helm(ctx, env, c, "upgrade", release, chart, "--namespace", chartNamespace,
		"--reuse-values", "--set", "image.tag="+img.Tag(), "--wait", "--timeout", "5m")
	require.NoError(t, err, "helm upgrade of %s to %s: %s", cluster, img.Ref, out)
	waitUpgraded(t, cluster, img.Ref)
	for _, at := range tree {
		switch {
		case at.name == cluster && at.parent != "":
			require.NoError(t, c.WaitTargetReady(ctx, at.parent, 2*time.Minute))
		case at.parent == cluster:
			require.NoError(t, env.Cluster(at.name).WaitTargetReady(ctx, cluster, 2*time.Minute))
		}
	}
}

// waitKubeletPort waits until child's virtual node in parent advertises a
// kubelet port that ok accepts, for longer than the agent's periodic ask.
func waitKubeletPort(t *testing.T, parent, child string, ok func(int32) bool) {
	t.Helper()
	framework.EventuallyEvery(t, time.Second, 3*time.Minute, fmt.Sprintf("%s's node in %s advertises the kubelet port", child, parent), func(ctx context.Context) (bool, string) {
		n, err := env.Cluster(parent).Client.CoreV1().Nodes().Get(ctx, child, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
		return ok(port), fmt.Sprintf("port %d", port)
	})
}

// unstate removes annotation keys from node in cluster, as an operator
// does with kubectl annotate NODE KEY-.
func unstate(t *testing.T, cluster, node string, keys ...string) {
	t.Helper()
	remove := map[string]any{}
	for _, k := range keys {
		remove[k] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": remove}})
	require.NoError(t, err)
	_, err = env.Cluster(cluster).Client.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// requireCompatible waits until child's Target to parent is Compatible
// with a message that contains each of says.
func requireCompatible(t *testing.T, child, parent string, says ...string) {
	t.Helper()
	targets, err := v1alpha1.NewTargetClient(env.Cluster(child).Config)
	require.NoError(t, err)
	var last string
	framework.EventuallyEvery(t, time.Second, 2*time.Minute, fmt.Sprintf("%s's Target %s Compatible, saying %q", child, parent, says), func(ctx context.Context) (bool, string) {
		target, err := targets.Get(ctx, parent, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(target.Status.Conditions, v1alpha1.ConditionCompatible)
		if c == nil {
			return false, "no Compatible condition"
		}
		last = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		for _, s := range says {
			if !strings.Contains(c.Message, s) {
				return false, last
			}
		}
		return c.Status == metav1.ConditionTrue, last
	})
	t.Logf("%s's Target %s: Compatible %s", child, parent, last)
}
