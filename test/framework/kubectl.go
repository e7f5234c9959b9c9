package framework

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"

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
