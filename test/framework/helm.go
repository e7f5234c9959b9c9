package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nestlet/nestlet/launcher"
)

// Helm runs the pinned helm (hack/install-binaries.sh builds it into the
// environment's binary directory) against cluster c, as an operator on this
// machine does, with its configuration and cache in a directory of its own
// under the environment's, and returns its standard output; a failure's
// error holds its standard error.
func Helm(ctx context.Context, env *launcher.Environment, c *launcher.Cluster, args ...string) (string, error) {
	bin := filepath.Join(env.Binaries.Dir, "helm")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("helm is missing (%w): run hack/install-binaries.sh (or make test)", err)
	}
	home := filepath.Join(env.Dir, "helm")
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", c.KubeconfigPath}, args...)...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
