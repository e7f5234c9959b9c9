package kubelet

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kubectl logs at the root for a pod two levels down returns what the same
// command returns in the leaf, for each option, and -f streams new lines.
func TestLogsTwoLevelsDown(t *testing.T) {
	ns, leaf, leafPod := runPod(t, "east")
	require.Equal(t, "east-1", leaf)
	now := time.Now()
	appendLog(t, leaf, now.Add(-time.Hour), "old one", "old two", "old three", "old four")
	// Stamped in the future, so that --since=1s keeps them on both sides
	// however long the commands take.
	appendLog(t, leaf, now.Add(10*time.Minute), "late one", "late two")
	// kwok's pods share one log file: lines that the tests before this one
	// wrote at their time leave the --since=1s window first (else the
	// window would hold them for the first command and not the second).
	time.Sleep(time.Until(now.Add(1100 * time.Millisecond)))

	for _, args := range [][]string{
		nil,
		{"--tail=3"},
		{"--since=1s"},
		{"--timestamps"},
		{"--tail=2", "--timestamps"},
		{"--limit-bytes=10"},
	} {
		t.Run(strings.Join(append([]string{"logs"}, args...), " "), func(t *testing.T) {
			atRoot := mustKubectl(t, "root", "", append([]string{"logs", "-n", ns, "app"}, args...)...)
			inLeaf := mustKubectl(t, leaf, "", append([]string{"logs", "-n", ns, leafPod}, args...)...)
			require.Equal(t, inLeaf, atRoot)
			require.NotEmpty(t, atRoot)
		})
	}
	require.Equal(t, "late one\nlate two\n", mustKubectl(t, "root", "", "logs", "-n", ns, "app", "--since=1s"))
	require.Equal(t, "old four\nlate one\nlate two\n", mustKubectl(t, "root", "", "logs", "-n", ns, "app", "--tail=3"))

	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", env.Cluster("root").KubeconfigPath,
			"logs", "-f", "--tail=1", "-n", ns, "app")
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		defer func() { cancel(); _ = cmd.Wait() }()
		lines := bufio.NewScanner(out)
		require.True(t, lines.Scan(), "no first line")
		require.Equal(t, "late two", lines.Text())
		// A line written now arrives while the stream is open.
		appendLog(t, leaf, time.Now(), "followed line")
		require.True(t, lines.Scan(), "stream ended before the new line")
		require.Equal(t, "followed line", lines.Text())
	})
}

// Logs of a pod one level down, through an agent in direct mode.
func TestLogsDirectMode(t *testing.T) {
	ns, leaf, leafPod := runPod(t, "west")
	require.Equal(t, "west", leaf)
	appendLog(t, leaf, time.Now(), "west line")
	atRoot := mustKubectl(t, "root", "", "logs", "-n", ns, "app")
	require.Equal(t, mustKubectl(t, leaf, "", "logs", "-n", ns, leafPod), atRoot)
	require.Contains(t, atRoot, "west line")
}
