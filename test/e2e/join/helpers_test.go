package join

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
)

func targets(t *testing.T, cluster string) v1alpha1.TargetInterface {
	t.Helper()
	c, err := v1alpha1.NewTargetClient(env.Cluster(cluster).Config)
	require.NoError(t, err)
	return c
}

// getTarget returns Target name of cluster.
func getTarget(t *testing.T, cluster, name string) *v1alpha1.Target {
	t.Helper()
	tg, err := targets(t, cluster).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return tg
}

// createTarget creates a Target in cluster and deletes it (waiting for the
// agent to let it go) when the test ends.
func createTarget(t *testing.T, cluster string, tg *v1alpha1.Target) {
	t.Helper()
	_, err := targets(t, cluster).Create(t.Context(), tg, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { deleteTarget(t, cluster, tg.Name) })
}

// deleteTarget deletes a Target and waits until it is gone.
func deleteTarget(t *testing.T, cluster, name string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	c := targets(t, cluster)
	err := c.Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	require.NoErrorf(t, err, "target %s of %s was not removed", name, cluster)
}

// waitReason waits until the Target's Ready condition has reason and
// returns the Target.
func waitReason(t *testing.T, cluster, name, reason string) *v1alpha1.Target {
	t.Helper()
	var last *v1alpha1.Target
	err := env.Cluster(cluster).WaitTarget(t.Context(), name, time.Minute, func(tg *v1alpha1.Target) bool {
		last = tg
		return launcher.TargetCondition(tg, v1alpha1.ConditionReady).Reason == reason
	})
	if err != nil {
		var conds []metav1.Condition
		if last != nil {
			conds = last.Status.Conditions
		}
		t.Fatalf("target %s of %s: no Ready condition with reason %s: %v; conditions %+v", name, cluster, reason, err, conds)
	}
	return last
}

// tokenSecret makes a Secret in cluster holding token and returns a
// reference to it.
func tokenSecret(t testing.TB, cluster, name, token string) v1alpha1.SecretReference {
	t.Helper()
	c := env.Cluster(cluster)
	_, err := c.Client.CoreV1().Secrets("nestlet-system").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "nestlet-system"},
		StringData: map[string]string{"token": token},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Secrets("nestlet-system").Delete(context.WithoutCancel(t.Context()), name, metav1.DeleteOptions{})
	})
	return v1alpha1.SecretReference{Namespace: "nestlet-system", Name: name}
}

// requireNoNode fails if cluster has a node called name.
func requireNoNode(t *testing.T, cluster, name string) {
	t.Helper()
	_, err := env.Cluster(cluster).Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.Truef(t, apierrors.IsNotFound(err), "node %s exists in %s (err %v)", name, cluster, err)
}

// tokenOf is the token of the join command `nestctl token create` printed.
var tokenOf = regexp.MustCompile(`--token\s+(\S+)`)

// joinToken makes a bootstrap token in root (nestctl token create with
// args) and stores it in Secret name of cluster, as nestctl join would.
func joinToken(tb testing.TB, cluster, name string, args ...string) v1alpha1.SecretReference {
	tb.Helper()
	out, err := env.Cluster("root").Nestctl(tb.Context(), append([]string{"token", "create", "--cluster-name=root"}, args...)...)
	require.NoError(tb, err)
	m := tokenOf.FindStringSubmatch(out)
	require.NotNil(tb, m, out)
	return tokenSecret(tb, cluster, name, m[1])
}
