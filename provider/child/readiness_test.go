package child

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// A short outage of this cluster's API server is tolerated: the virtual
// nodes keep renewing their leases in the parents. A longer one, or one
// before the API server was ever ready, is not.
func TestOutageTolerance(t *testing.T) {
	down := errors.New("connection refused")
	clk := clocktesting.NewFakeClock(time.Now())
	var answer error
	newAgent := func(tol time.Duration) *readiness {
		return newReadiness(nil, func(context.Context) error { return answer }, tol, clk)
	}
	step := func(a *readiness, d time.Duration) error {
		clk.Step(d)
		return a.ready(t.Context())
	}

	a := newAgent(30 * time.Second)
	answer = down
	require.Error(t, step(a, 0), "never ready yet: nothing to tolerate")
	answer = nil
	require.NoError(t, step(a, 2*time.Second))
	answer = down
	require.NoError(t, step(a, 2*time.Second), "the outage starts: tolerated")
	require.NoError(t, step(a, 25*time.Second), "27 s after the last good check")
	require.ErrorIs(t, step(a, 5*time.Second), down, "32 s: past the tolerance")
	require.ErrorIs(t, step(a, 60*time.Second), down)
	answer = nil
	require.NoError(t, step(a, 2*time.Second), "ready again")
	answer = down
	require.NoError(t, step(a, 2*time.Second), "a new outage is tolerated afresh")

	a = newAgent(-1)
	answer = nil
	require.NoError(t, step(a, 2*time.Second))
	answer = down
	require.ErrorIs(t, step(a, 2*time.Second), down, "no tolerance")

	// One check answers every Target for readyTTL.
	a = newAgent(-1)
	answer = nil
	require.NoError(t, step(a, 2*time.Second))
	answer = down
	require.NoError(t, step(a, readyTTL/2), "the answer of a moment ago")
	require.Error(t, step(a, readyTTL))
}
