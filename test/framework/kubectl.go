package framework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nestlet/nestlet/launcher"
)

// Kubectl runs the environment's kubectl against cluster c, with stdin
// when not empty, and returns stdout, stderr and the error.
func Kubectl(ctx context.Context, env *launcher.Environment, c *launcher.Cluster, stdin string, args ...string) (string, string, error) {
	args = append([]string{"--kubeconfig", c.KubeconfigPath}, args...)
	cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// ExitCode returns the exit code of a command's error: 0 for nil, -1 when
// the command did not exit (it did not start, say).
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// PortForwardGet runs `kubectl port-forward target :port` against cluster c
// and returns the body of a GET of path through it.
func PortForwardGet(t testing.TB, env *launcher.Environment, c *launcher.Cluster, ns, target, port, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", c.KubeconfigPath, "-n", ns, "port-forward", target, ":"+port)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "no output from port-forward %s", target)
	m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> \d+`).FindStringSubmatch(lines.Text())
	require.NotNil(t, m, "port-forward %s said %q", target, lines.Text())
	resp, err := http.Get("http://127.0.0.1:" + m[1] + path)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return string(body)
}
