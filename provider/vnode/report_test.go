package vnode

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// A failed summary write is tried again a second later, then after 2 s,
// 4 s, 8 s..., at most every 30 s. The Target starts afresh
// (Reconnected) only after an outage of OutageThreshold or more in which
// the parent did not answer at all; a failure that passes at the first
// retry, or a parent that answers with errors (too busy), does not.
func TestFailedWritesRetriedAndOutagesMeasured(t *testing.T) {
	clock := clocktesting.NewFakeClock(start)
	nodes := newIndexer()
	require.NoError(t, nodes.Add(readyNode("n0", "2")))
	changed := make(chan struct{})
	patched := make(chan time.Time, 10)
	reconnected := make(chan time.Duration, 10)
	var failWith atomic.Pointer[error]
	cfg := validConfig()
	cfg.Nodes = corelisters.NewNodeLister(nodes)
	cfg.Changed = changed
	cfg.Clock = clock
	// Neither periodic reports nor change events write during the test
	// (a change only arms the rate limit's hour), so every write is the
	// test's kick or a retry.
	cfg.ReportFrequency = time.Hour
	cfg.MinReportInterval = time.Hour
	cfg.PatchSummary = func(context.Context, string) error {
		patched <- clock.Now()
		if err := failWith.Load(); err != nil {
			return *err
		}
		return nil
	}
	cfg.Reconnected = func(outage time.Duration) { reconnected <- outage }
	p, err := New(cfg)
	require.NoError(t, err)
	_, err = p.InitialNode()
	require.NoError(t, err)
	p.NotifyNodeStatus(t.Context(), func(*corev1.Node) {})
	_, barrier := changeSignals(t, changed)

	fail := func(err error) { failWith.Store(&err) }
	written := func(at time.Time) {
		t.Helper()
		select {
		case got := <-patched:
			require.Equal(t, at, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("no write at %s", at.Sub(start))
		}
		barrier() // the loop has handled the write's outcome
	}
	// after steps the clock by d and expects a write then.
	after := func(d time.Duration) {
		t.Helper()
		clock.Step(d)
		written(clock.Now())
	}
	noReconnect := func(what string) {
		t.Helper()
		select {
		case d := <-reconnected:
			t.Fatalf("%s: started afresh after %s", what, d)
		default:
		}
	}

	p.PostStatus()
	written(start)

	// One write fails, the retry a second later works: no outage.
	fail(errors.New("connection reset by peer"))
	p.PostStatus()
	written(clock.Now())
	failWith.Store(nil)
	after(time.Second)
	noReconnect("a failure that passed at the first retry")

	// No answer for 91 s: retries at +1, +3, +7, +15, +31, +61, +91 s;
	// the last works.
	fail(errors.New("dial tcp: connect: connection refused"))
	p.PostStatus()
	written(clock.Now())
	for _, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second} {
		after(d)
	}
	failWith.Store(nil)
	after(30 * time.Second)
	select {
	case d := <-reconnected:
		require.Equal(t, 91*time.Second, d)
	default:
		t.Fatal("an outage of 91 s without an answer did not start the Target afresh")
	}
	// A short one, two retries: 3 s, under the threshold.
	fail(errors.New("connection reset by peer"))
	p.PostStatus()
	written(clock.Now())
	after(time.Second)
	failWith.Store(nil)
	after(2 * time.Second)
	noReconnect("an outage of 3 s")

	// A parent too busy answers errors for 31 s: reachable throughout.
	fail(apierrors.NewTooManyRequests("busy", 1))
	p.PostStatus()
	written(clock.Now())
	after(time.Second)
	fail(apierrors.NewTimeoutError("request did not complete within requested timeout", 0))
	for _, d := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		after(d)
	}
	failWith.Store(nil)
	after(16 * time.Second)
	noReconnect("a parent that answered with errors")
}
