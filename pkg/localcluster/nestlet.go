package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/charts/nestlet/crds"
)

// NestletBinaries are the project's own programs, built from this checkout.
type NestletBinaries struct {
	Dir       string
	Nestlet   string
	Nestctl   string
	Scheduler string
	Proxy     string
}

var (
	buildOnce sync.Once
	built     *NestletBinaries
	buildErr  error
)

// BuildNestlet builds cmd/nestlet, cmd/nestctl, cmd/nestlet-scheduler and cmd/nestlet-proxy of
// this checkout once per process into a temporary directory.
func BuildNestlet(ctx context.Context) (*NestletBinaries, error) {
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "nestlet-bin-")
		if err != nil {
			buildErr = err
			return
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./cmd/nestlet", "./cmd/nestctl", "./cmd/nestlet-scheduler", "./cmd/nestlet-proxy")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building nestlet binaries: %w\n%s", err, out)
			return
		}
		built = &NestletBinaries{Dir: dir, Nestlet: filepath.Join(dir, "nestlet"), Nestctl: filepath.Join(dir, "nestctl"),
			Scheduler: filepath.Join(dir, "nestlet-scheduler"), Proxy: filepath.Join(dir, "nestlet-proxy")}
	})
	return built, buildErr
}

// RemoveBuiltNestlet removes the directory BuildNestlet built into, when
// it made a temporary one; call it once the process needs the binaries no
// more (the end of a TestMain).
func RemoveBuiltNestlet() {
	if built != nil && strings.HasPrefix(filepath.Base(built.Dir), "nestlet-bin-") {
		_ = os.RemoveAll(built.Dir)
	}
}

// InstallCRDs installs Nestlet's CRDs in the cluster.
func (c *Cluster) InstallCRDs(ctx context.Context) error { return crds.Install(ctx, c.Config) }

// StartAgent installs the CRDs in c and starts a nestlet agent for it, with
// an admin kubeconfig, logging to <env dir>/<cluster>-nestlet.log.
func (e *Environment) StartAgent(ctx context.Context, c *Cluster, extraArgs ...string) (*Process, error) {
	bins, err := BuildNestlet(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.InstallCRDs(ctx); err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig=" + c.KubeconfigPath, "--v=2"}, extraArgs...)
	return e.StartProcess(c.Name+"-nestlet", bins.Nestlet, args...)
}

// StartProxy starts a nestlet-proxy for c on free loopback ports, with an
// admin kubeconfig, and waits until it has published its endpoints in
// kube-public/nestlet-info.
func (e *Environment) StartProxy(ctx context.Context, c *Cluster) (*Process, error) {
	bins, err := BuildNestlet(ctx)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	ip := HostIP()
	p, err := e.StartProcess(c.Name+"-nestlet-proxy", bins.Proxy,
		"--kubeconfig="+c.KubeconfigPath, "--bind-address="+ip, "--advertise-address="+ip,
		fmt.Sprintf("--kubelet-port=%d", ports[0]), fmt.Sprintf("--tunnel-port=%d", ports[1]), "--v=2")
	if err != nil {
		return nil, err
	}
	err = waitHealthy(ctx, p, time.Minute, func(ctx context.Context) bool {
		cm, err := c.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
		return err == nil && cm.Data[api.ClusterInfoProxyKubeletEndpoint] == net.JoinHostPort(ip, strconv.Itoa(ports[0]))
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: nestlet-proxy: %w", c.Name, err)
	}
	return p, nil
}

// Nestctl runs nestctl against cluster c and returns its standard output.
func (c *Cluster) Nestctl(ctx context.Context, args ...string) (string, error) {
	bins, err := BuildNestlet(ctx)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bins.Nestctl, append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)...)
	var stderr []byte
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		stderr = ee.Stderr
	}
	if err != nil {
		return string(out), fmt.Errorf("nestctl %v: %w: %s", args, err, stderr)
	}
	return string(out), nil
}

var joinLine = regexp.MustCompile(`nestctl join (.*)`)

// JoinOptions tune Join.
type JoinOptions struct {
	// ClusterName of the child in the parent (default: the child's name).
	ClusterName string
	// ManualApproval leaves the child's CSR pending (no --auto-approve).
	ManualApproval bool
	// ExtraJoinArgs are added to `nestctl join`.
	ExtraJoinArgs []string
	// ParentURL is where the child reaches the parent's API server, when
	// not directly (a proxy in between).
	ParentURL string
	// NoWait returns once the Target is written, without waiting for it to
	// be Ready.
	NoWait bool
}

// Join joins child to parent as an operator does: `nestctl token create`
// against the parent, then the printed `nestctl join` against the child. It
// waits until the child's Target is Ready, and returns the Target's name.
func Join(ctx context.Context, parent, child *Cluster, o JoinOptions) (string, error) {
	name := o.ClusterName
	if name == "" {
		name = child.Name
	}
	create := []string{"token", "create", "--cluster-name=" + parent.Name, "--child-name=" + name}
	if !o.ManualApproval {
		create = append(create, "--auto-approve")
	}
	if o.ParentURL != "" {
		create = append(create, "--parent-url="+o.ParentURL)
	}
	out, err := parent.Nestctl(ctx, create...)
	if err != nil {
		return "", err
	}
	m := joinLine.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("token create printed no join command: %q", out)
	}
	args := append(splitArgs(m[1]), o.ExtraJoinArgs...)
	out, err = child.Nestctl(ctx, append([]string{"join"}, args...)...)
	if err != nil {
		return "", err
	}
	target := regexp.MustCompile(`target/(\S+) created`).FindStringSubmatch(out)
	if target == nil {
		return "", fmt.Errorf("join printed no target: %q", out)
	}
	if o.NoWait {
		return target[1], nil
	}
	return target[1], child.WaitTargetReady(ctx, target[1], 2*time.Minute)
}

func splitArgs(s string) []string {
	return regexp.MustCompile(`\s+`).Split(s, -1)
}

// WaitTargetReady waits until Target name has condition Ready=True.
func (c *Cluster) WaitTargetReady(ctx context.Context, name string, timeout time.Duration) error {
	var last *v1alpha1.Target
	err := c.WaitTarget(ctx, name, timeout, func(t *v1alpha1.Target) bool {
		last = t
		return TargetCondition(t, v1alpha1.ConditionReady).Status == metav1.ConditionTrue
	})
	if err != nil && last != nil {
		return fmt.Errorf("target %s of %s not Ready: %w (conditions %+v)", name, c.Name, err, last.Status.Conditions)
	}
	return err
}

// WaitTarget waits until ok holds for Target name.
func (c *Cluster) WaitTarget(ctx context.Context, name string, timeout time.Duration, ok func(*v1alpha1.Target) bool) error {
	targets, err := v1alpha1.NewTargetClient(c.Config)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		t, err := targets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		return ok(t), nil
	})
}

// TargetCondition returns condition typ of t (zero value if absent).
func TargetCondition(t *v1alpha1.Target, typ string) metav1.Condition {
	for _, c := range t.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}
