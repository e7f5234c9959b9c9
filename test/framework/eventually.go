package framework

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PollInterval is how often Eventually checks.
const PollInterval = 250 * time.Millisecond

// Eventually calls check at once, then every PollInterval, until it
// reports done, and fails the test if it has not within timeout, saying
// what was awaited and check's last words (why it was not done yet).
//
// check is given a context bounded by timeout (not by the test's own,
// which is done by the time cleanups run: Eventually serves in a cleanup
// too), and runs on the calling goroutine: a check that meets what no
// retry would mend may fail the test itself (require, t.Fatal) to stop at
// once. Eventually, which ends the test on failure, must be called from
// the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) (done bool, last string)) {
	t.Helper()
	EventuallyEvery(t, PollInterval, timeout, what, check)
}

// EventuallyEvery is Eventually checking every interval: for a wait that
// must see a short-lived state or whose duration is reported (faster), or
// whose check is costly (slower).
func EventuallyEvery(t testing.TB, interval, timeout time.Duration, what string, check func(ctx context.Context) (done bool, last string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.WithoutCancel(t.Context()), interval, timeout, true, func(ctx context.Context) (bool, error) {
		done, msg := check(ctx)
		// A check the deadline cut short says only that: the one before
		// says what was seen.
		// (A client's rate limiter says so before the deadline passes.)
		if (ctx.Err() == nil && !strings.Contains(msg, "would exceed context deadline")) || last == "" {
			last = msg
		}
		return done, nil
	})
	if err != nil {
		if last == "" {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		t.Fatalf("%s: not within %s: %v; last: %s", what, timeout, err, last)
	}
}
