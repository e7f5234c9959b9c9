package faults

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/nestlet/nestlet/test/framework"
)

// orphanGrace is how long a delegate may outlive its parent pod before the
// fault watch counts it as an orphan: the root's grace period for an
// unreachable child, and as long again for the child to catch up after a
// heal.
const orphanGrace = 2 * graceSeconds * time.Second

// watchFaults watches the pods of ns in the root, east and west while the
// faults happen (framework.FaultWatch): what settle cannot see, such as a
// pod that ran twice during a partition and was cleaned up after.
func watchFaults(tb testing.TB, ns string) *framework.FaultWatch {
	tb.Helper()
	clusters := map[string]kubernetes.Interface{}
	for _, c := range []string{"root", "east", "west"} {
		clusters[c] = env.Cluster(c).Client
	}
	w, err := framework.StartFaultWatch(tb.Context(), clusters, map[string]string{"east": "root", "west": "root"}, ns, orphanGrace)
	require.NoError(tb, err)
	return w
}

// reportFaults stops w at the end of t and fails t unless it counted
// exactly duplicates pods run twice at once: none, whatever the fault,
// unless the test forces one as an operator can. Pods gone without a
// deletion and orphans are logged with their worst duration.
func reportFaults(t *testing.T, w *framework.FaultWatch, duplicates int) {
	t.Cleanup(func() {
		r := w.Stop()
		t.Logf("faults watched throughout: %s", r)
		if r.Duplicates.N != duplicates {
			t.Errorf("pods run twice at once: %s, want %d", r.Duplicates, duplicates)
		}
	})
}
