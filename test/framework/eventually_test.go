package framework

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as testing's does.
type recorder struct {
	testing.TB
	ctx context.Context

	mu    sync.Mutex
	fatal string
}

func newRecorder(t *testing.T) *recorder { return &recorder{TB: t, ctx: t.Context()} }

func (r *recorder) Helper()                  {}
func (r *recorder) Context() context.Context { return r.ctx }

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f as a test would, and tells whether it returned (false:
// it failed the test and ended the goroutine).
func (r *recorder) run(f func()) (returned bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
		returned = true
	}()
	<-done
	return returned
}

func TestEventually(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		// check is called with how many times it was called before.
		check        func(t testing.TB, calls int) (bool, string)
		wantReturned bool
		wantCalls    int // at least; exactly when it returned
		wantFatal    string
		// stopped: failed by the check, before the timeout, with no call
		// after.
		stopped bool
	}{{
		name:    "done at once: one call, no wait",
		timeout: time.Minute,
		check:   func(testing.TB, int) (bool, string) { return true, "" },
		// A check done at once is not called again.
		wantReturned: true, wantCalls: 1,
	}, {
		name:    "done on the third call",
		timeout: time.Minute,
		check: func(_ testing.TB, calls int) (bool, string) {
			return calls == 2, "call " + strconv.Itoa(calls)
		},
		wantReturned: true, wantCalls: 3,
	}, {
		name:    "never done: fails with what and the last words",
		timeout: 100 * time.Millisecond,
		check: func(_ testing.TB, calls int) (bool, string) {
			return false, "still call " + strconv.Itoa(calls)
		},
		wantCalls: 2,
		wantFatal: "the thing: not within 100ms: context deadline exceeded; last: still call ",
	}, {
		name:      "never done, nothing said",
		timeout:   50 * time.Millisecond,
		check:     func(testing.TB, int) (bool, string) { return false, "" },
		wantCalls: 1,
		wantFatal: "the thing: not within 50ms: context deadline exceeded",
	}, {
		name:    "a check that fails the test stops at once",
		timeout: time.Minute,
		check: func(t testing.TB, calls int) (bool, string) {
			if calls == 1 {
				t.Fatalf("broken for good")
			}
			return false, "not yet"
		},
		wantCalls: 2,
		wantFatal: "broken for good",
		stopped:   true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder(t)
			calls := 0
			start := time.Now()
			returned := r.run(func() {
				EventuallyEvery(r, 10*time.Millisecond, tt.timeout, "the thing", func(ctx context.Context) (bool, string) {
					assert.NoError(t, ctx.Err(), "the check's context is live")
					_, ok := ctx.Deadline()
					assert.True(t, ok, "the check's context ends with the timeout")
					c := calls
					calls++
					return tt.check(r, c)
				})
			})
			require.Equal(t, tt.wantReturned, returned)
			require.GreaterOrEqual(t, calls, tt.wantCalls)
			if tt.wantReturned {
				require.Equal(t, tt.wantCalls, calls)
				require.Empty(t, r.fatal)
				return
			}
			require.Contains(t, r.fatal, tt.wantFatal)
			if tt.stopped {
				require.Equal(t, tt.wantCalls, calls, "checked again after the test failed")
				require.Less(t, time.Since(start), tt.timeout)
			} else {
				require.GreaterOrEqual(t, time.Since(start), tt.timeout, "failed before the timeout")
			}
		})
	}
}

// Eventually checks at once, then every PollInterval.
func TestEventuallyDefaultInterval(t *testing.T) {
	var at []time.Time
	start := time.Now()
	Eventually(t, time.Minute, "three checks", func(context.Context) (bool, string) {
		at = append(at, time.Now())
		return len(at) == 3, ""
	})
	require.Len(t, at, 3)
	require.Less(t, at[0].Sub(start), PollInterval, "the first check is at once")
	require.GreaterOrEqual(t, at[2].Sub(at[0]), 2*PollInterval-10*time.Millisecond)
}

// Eventually takes a *testing.B as well.
func BenchmarkEventually(b *testing.B) {
	for b.Loop() {
		Eventually(b, time.Second, "done", func(context.Context) (bool, string) { return true, "" })
	}
}

// In a cleanup, where the test's context is done already, Eventually
// still waits for its check.
func TestEventuallyInCleanup(t *testing.T) {
	r := newRecorder(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r.ctx = ctx
	calls := 0
	returned := r.run(func() {
		EventuallyEvery(r, 10*time.Millisecond, time.Minute, "the thing", func(ctx context.Context) (bool, string) {
			assert.NoError(t, ctx.Err(), "the check's context is live")
			calls++
			return calls == 2, ""
		})
	})
	require.True(t, returned, r.fatal)
	require.Equal(t, 2, calls)
}
