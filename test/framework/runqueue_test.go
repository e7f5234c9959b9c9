package framework

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseSchedstat(t *testing.T) {
	q, err := parseSchedstat("5822680 4996101 3\n")
	require.NoError(t, err)
	require.Equal(t, RunQueue{Ran: 5822680 * time.Nanosecond, Waited: 4996101 * time.Nanosecond}, q)
	require.InDelta(t, 0.858, q.WaitPerRun(), 0.001)
	for _, bad := range []string{"", "12", "a b c"} {
		_, err := parseSchedstat(bad)
		require.Error(t, err, "%q", bad)
	}
	require.Equal(t, RunQueue{Ran: time.Second}, RunQueue{Ran: 3 * time.Second, Waited: time.Second}.Sub(RunQueue{Ran: 2 * time.Second, Waited: 2 * time.Second}),
		"a thread that ended takes its times: never below zero")
	require.Zero(t, RunQueue{Waited: time.Second}.WaitPerRun())
}

// More threads busy than this machine has CPUs must wait for them: the
// sum over this process's threads shows the work done and the wait.
func TestRunQueueOfSelf(t *testing.T) {
	before, err := RunQueueOf(os.Getpid())
	require.NoError(t, err)
	busy := 2 * runtime.NumCPU()
	// As many Go threads running at once as there are busy goroutines.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(busy))
	var wg sync.WaitGroup
	for range busy {
		wg.Go(func() {
			for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
			}
		})
	}
	wg.Wait()
	after, err := RunQueueOf(os.Getpid())
	require.NoError(t, err)
	d := after.Sub(before)
	require.Greater(t, d.Ran, 150*time.Millisecond, "%d threads spun for 200 ms each: %s", busy, d)
	require.Greater(t, d.Waited, time.Duration(0), "%d threads on %d CPUs waited for one: %s", busy, runtime.NumCPU(), d)
}
