package framework

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/nestlet/nestlet/launcher"
)

// RequireRealNodesEnv, set to 1, makes the real-leaf tests fail instead of
// skip on a machine that cannot run real nodes: .ci/run sets it, so that
// the project's own machines always run them.
const RequireRealNodesEnv = "NESTLET_REQUIRE_REAL_NODES"

// realNodesSkipped is why the real-leaf tests of this package skip, or "".
var realNodesSkipped string

// RealNodesUnavailable returns why this machine cannot run real nodes, or
// nil when it can.
func RealNodesUnavailable() error {
	rt, err := launcher.FindNodeRuntime("")
	if err != nil {
		return err
	}
	return launcher.CheckRealNodes(rt)
}

// RunRealTreeMain is RunTreeMain for a package whose tree has real nodes.
// On a machine that cannot run them it prints why in one line and runs the
// tests, which skip with that reason (NeedRealNodes); with
// $NESTLET_REQUIRE_REAL_NODES=1 it fails instead.
func RunRealTreeMain(m *testing.M, tree Tree, started func(*TreeEnv)) int {
	if code, ran := skipWithoutRealNodes(m); ran {
		return code
	}
	return RunTreeMain(m, tree, started)
}

// RunRealMain is RunRealTreeMain for a package that starts its clusters
// itself: start runs only where real nodes can, and the teardown it
// returns runs after the tests, told whether they failed. An error of
// start fails the package (start cleans up after itself).
func RunRealMain(m *testing.M, start func() (teardown func(failed bool), err error)) (code int) {
	if code, ran := skipWithoutRealNodes(m); ran {
		return code
	}
	teardown, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the clusters:", err)
		return 1
	}
	defer func() { teardown(code != 0) }()
	return m.Run()
}

// skipWithoutRealNodes runs the tests, which skip, when this machine cannot
// run real nodes, and returns their exit code and true; or 1 and true with
// $NESTLET_REQUIRE_REAL_NODES=1 or when the check itself failed; or false
// when real nodes can run.
func skipWithoutRealNodes(m *testing.M) (int, bool) {
	err := RealNodesUnavailable()
	if err == nil {
		return 0, false
	}
	if !errors.Is(err, launcher.ErrRealNodesUnavailable) || os.Getenv(RequireRealNodesEnv) == "1" {
		fmt.Fprintf(os.Stderr, "real-leaf tests cannot run (%s=1 makes that a failure): %v\n", RequireRealNodesEnv, err)
		return 1, true
	}
	realNodesSkipped = err.Error()
	fmt.Fprintf(os.Stderr, "SKIPPING the real-leaf tests: %v\n", err)
	return m.Run(), true
}

// NeedRealNodes skips the test when its package's real nodes could not run
// (see RunRealTreeMain).
func NeedRealNodes(t testing.TB) {
	t.Helper()
	if realNodesSkipped != "" {
		t.Skip("real nodes unavailable on this machine: " + realNodesSkipped)
	}
}
