package framework

import (
	"testing"

	"github.com/nestlet/nestlet/pkg/localcluster"
)

// StartForTest starts spec for one test and stops it when the test ends,
// pass, fail or panic. On failure it prints where the logs are and their
// last lines, and keeps them; on success it removes them.
func StartForTest(t testing.TB, spec localcluster.Spec) *localcluster.Environment {
	t.Helper()
	env, err := localcluster.Start(t.Context(), localcluster.Config{}, spec)
	if err != nil {
		t.Fatalf("starting clusters: %v", err)
	}
	t.Cleanup(func() { env.Cleanup(t.Failed(), t.Logf) })
	return env
}

// Main runs the tests of a package that starts clusters with StartForTest,
// then removes the nestlet binaries built for them: its TestMain is
// os.Exit(framework.Main(m)).
func Main(m *testing.M) int {
	defer localcluster.RemoveBuiltNestlet()
	return m.Run()
}
