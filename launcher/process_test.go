package launcher

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A process that starts children of its own leaves none behind once stopped,
// even when it ignores SIGTERM.
func TestProcessStopKillsGroup(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(dir, "tree", "/bin/sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & echo started; wait")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(p.Tail(1), "started") }, 10*time.Second, 20*time.Millisecond)
	require.True(t, p.Alive())

	p.Stop(200 * time.Millisecond)
	exited, _ := p.Exited()
	require.True(t, exited)
	require.False(t, p.Alive(), "a process of the group survived Stop")
	p.Stop(time.Millisecond) // idempotent
}

func TestFreePortsDistinct(t *testing.T) {
	ports, err := freePorts(50)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
	}
}
