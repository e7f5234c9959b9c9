package kubelet

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nestlet/nestlet/test/framework"
	"github.com/stretchr/testify/require"
)

func TestExecTwoLevelsDown(t *testing.T) {
	ns, leaf, leafPod := runPod(t, "east")

	require.Equal(t, "hello\n", mustKubectl(t, "root", "", "exec", "-n", ns, "app", "--", "echo", "hello"))
	// stdin reaches the leaf (kwok does not pass stdin's end on, so the
	// command must end by itself).
	require.Equal(t, "first line\n", mustKubectl(t, "root", "first line\nsecond line\n", "exec", "-i", "-n", ns, "app", "--", "head", "-1"))

	// A failing command fails at the root as it does in the leaf.
	for _, cmd := range [][]string{
		{"sh", "-c", "echo to stderr >&2; exit 3"},
		{"/no/such/command"},
	} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			ctx := t.Context()
			rootOut, rootErr, rootRun := kubectl(ctx, "root", "", append([]string{"exec", "-n", ns, "app", "--"}, cmd...)...)
			leafOut, leafErr, leafRun := kubectl(ctx, leaf, "", append([]string{"exec", "-n", ns, leafPod, "--"}, cmd...)...)
			require.Error(t, leafRun)
			require.Error(t, rootRun)
			require.Equal(t, framework.ExitCode(leafRun), framework.ExitCode(rootRun))
			require.Equal(t, leafOut, rootOut)
			require.Equal(t, leafErr, rootErr)
		})
	}
}

func TestExecDirectMode(t *testing.T) {
	ns, _, _ := runPod(t, "west")
	require.Equal(t, "hello west\n", mustKubectl(t, "root", "", "exec", "-n", ns, "app", "--", "echo", "hello", "west"))
}

// kubectl attach streams the container's output (kwok attaches to the
// log file).
func TestAttachTwoLevelsDown(t *testing.T) {
	ns, leaf, _ := runPod(t, "east")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", env.Cluster("root").KubeconfigPath,
		"attach", "-n", ns, "app")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	marker := "attached " + ns
	// Written until it is seen: attach may start reading after the first
	// write.
	seen := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), marker) {
				seen <- true
				return
			}
		}
		seen <- false
	}()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		appendLog(t, leaf, time.Now(), marker)
		select {
		case ok := <-seen:
			require.True(t, ok, "attach ended before the line came")
			return
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("attach did not stream the line")
		}
	}
}

// kubectl port-forward at the root carries bytes to the pod two levels
// down and back (kwok connects the port to an echo server).
func TestPortForwardTwoLevelsDown(t *testing.T) {
	ns, _, _ := runPod(t, "east")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", env.Cluster("root").KubeconfigPath,
		"port-forward", "-n", ns, "pod/app", ":8080")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	require.True(t, sc.Scan(), "port-forward printed nothing")
	m := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text())
	require.NotNil(t, m, sc.Text())
	for i := range 2 { // two connections: one session each
		conn, err := net.DialTimeout("tcp", m[1], 10*time.Second)
		require.NoError(t, err)
		require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
		msg := strings.Repeat("ping ", 1000) + string(rune('a'+i)) + "\n"
		_, err = conn.Write([]byte(msg))
		require.NoError(t, err)
		got, err := bufio.NewReader(conn).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, msg, got)
		require.NoError(t, conn.Close())
	}
}
