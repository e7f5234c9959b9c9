package framework

import (
	"strings"
	"testing"

	"github.com/nestlet/nestlet/launcher"
)

// StartForTest starts spec for one test and stops it when the test ends,
// pass, fail or panic. On failure it prints where the logs are and their
// last lines, and keeps them; on success it removes them.
func StartForTest(t testing.TB, spec launcher.Spec) *launcher.Environment {
	t.Helper()
	env, err := launcher.Start(t.Context(), withChartIdentities(launcher.Config{}), spec)
	if err != nil {
		t.Fatalf("starting clusters: %v", err)
	}
	t.Cleanup(func() {
		if refused := Refusals(env); len(refused) > 0 {
			t.Errorf("Nestlet's components were refused by their own cluster (a permission the chart lacks):\n%s", strings.Join(refused, "\n"))
		}
		env.Cleanup(t.Failed(), t.Logf)
	})
	return env
}
