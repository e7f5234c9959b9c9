package kubeclient

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/config"
)

func electionConfig() config.LeaderElectionConfiguration {
	return config.LeaderElectionConfiguration{
		LeaderElect: true, ResourceLock: "leases", ResourceNamespace: "nestlet-system", ResourceName: "nestlet-agent",
		LeaseDuration: metav1.Duration{Duration: time.Hour}, RenewDeadline: metav1.Duration{Duration: 50 * time.Minute},
		RetryPeriod: metav1.Duration{Duration: 20 * time.Millisecond},
	}
}

// Two replicas: one runs, the other waits; when the first stops, it
// releases the lease only after its run returned, and the second runs. The
// lease lasts an hour here, so the second can only lead through the
// release, never through the lease's expiry.
func TestRunElectedHandsOver(t *testing.T) {
	client := fake.NewClientset()
	var running, overlaps atomic.Int32
	runs := make(chan string, 2)
	replica := func(ctx context.Context, name string) func() error {
		return func() error {
			return RunElected(ctx, client, electionConfig(), func(ctx context.Context) error {
				if running.Add(1) > 1 {
					overlaps.Add(1)
				}
				runs <- name
				<-ctx.Done()
				time.Sleep(50 * time.Millisecond) // winding down
				running.Add(-1)
				return nil
			})
		}
	}
	ctxA, stopA := context.WithCancel(t.Context())
	ctxB, stopB := context.WithCancel(t.Context())
	defer stopB()
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { errA <- replica(ctxA, "a")() }()
	require.Equal(t, "a", <-runs)
	go func() { errB <- replica(ctxB, "b")() }()
	stopA()
	require.NoError(t, <-errA)
	require.Equal(t, "b", <-runs)
	require.Zero(t, overlaps.Load(), "two replicas ran at once")
	stopB()
	require.NoError(t, <-errB)
}

// A replica that never led returns nil when stopped, without running.
func TestRunElectedStopsWhileWaiting(t *testing.T) {
	client := fake.NewClientset()
	ctxA, stopA := context.WithCancel(t.Context())
	defer stopA()
	led := make(chan struct{})
	go func() {
		_ = RunElected(ctxA, client, electionConfig(), func(ctx context.Context) error { close(led); <-ctx.Done(); return nil })
	}()
	<-led
	ctxB, stopB := context.WithCancel(t.Context())
	errB := make(chan error, 1)
	go func() {
		errB <- RunElected(ctxB, client, electionConfig(), func(context.Context) error { t.Error("b ran"); return nil })
	}()
	stopB()
	require.NoError(t, <-errB)
}

// Without leader election, run runs at once.
func TestRunElectedOff(t *testing.T) {
	ran := false
	require.NoError(t, RunElected(t.Context(), nil, config.LeaderElectionConfiguration{}, func(context.Context) error { ran = true; return nil }))
	require.True(t, ran)
}
