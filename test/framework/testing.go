package framework

import (
	"testing"
)

// StartForTest starts spec for one test and stops it when the test ends,
// pass, fail or panic. On failure it prints where the logs are and their
// last lines, and keeps them; on success it removes them.
func StartForTest(t testing.TB, spec Spec) *Environment {
	t.Helper()
	env, err := Start(t.Context(), Config{}, spec)
	if err != nil {
		t.Fatalf("starting clusters: %v", err)
	}
	t.Cleanup(func() { env.Cleanup(t.Failed(), t.Logf) })
	return env
}

// Cleanup stops the Environment; when failed it logs the tails of the logs
// and keeps the directory, else it removes it.
func (e *Environment) Cleanup(failed bool, logf func(format string, args ...any)) {
	e.Stop()
	if failed {
		logf("logs kept in %s; last lines:\n%s", e.Dir, e.LogTails(25))
		return
	}
	_ = e.RemoveDir()
}

// Main runs the tests of a package that starts clusters with StartForTest,
// then removes the nestlet binaries built for them: its TestMain is
// os.Exit(framework.Main(m)).
func Main(m *testing.M) int {
	defer RemoveBuiltNestlet()
	return m.Run()
}
