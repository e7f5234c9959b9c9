package framework

import (
	"testing"

	"github.com/nestlet/nestlet/launcher"
)

// StartForTest starts spec for one test and stops it when the test ends,
// pass, fail or panic. On failure it prints where the logs are and their
// last lines, and keeps them; on success it removes them.
func StartForTest(t testing.TB, spec launcher.Spec) *launcher.Environment {
	t.Helper()
	env, err := launcher.Start(t.Context(), launcher.Config{}, spec)
	if err != nil {
		t.Fatalf("starting clusters: %v", err)
	}
	t.Cleanup(func() { env.Cleanup(t.Failed(), t.Logf) })
	return env
}
