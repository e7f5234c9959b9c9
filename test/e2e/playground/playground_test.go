// Package playground tests `nestctl playground up` and `down` as a user runs
// them: a small topology (a root and one child with one kwok node) started
// by the real nestctl, left running after it returns, used with kubectl, and
// stopped with nothing left behind.
package playground

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

const topology = `
clusters:
- name: root
- name: child
  parent: root
  region: test
  nodes:
  - name: child-node
    labels:
      topology.kubernetes.io/region: test
    cpu: "4"
    memory: 8Gi
`

// run runs a program and returns its combined output.
func run(ctx context.Context, bin string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

func TestPlaygroundUpDown(t *testing.T) {
	ctx := t.Context()
	bins, err := launcher.FindNestletBinaries("")
	require.NoError(t, err)
	cp, err := launcher.FindBinaries("")
	require.NoError(t, err)
	binDir := filepath.Dir(cp.Etcd)

	work := t.TempDir()
	config := filepath.Join(work, "topology.yaml")
	require.NoError(t, os.WriteFile(config, []byte(topology), 0o644))
	dir := filepath.Join(work, "playground")
	nestctl := func(ctx context.Context, args ...string) (string, error) { return run(ctx, bins.Nestctl, args...) }

	// Refusals cost nothing and start nothing.
	bad := filepath.Join(work, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("clusters:\n- name: root\n- name: a\n  parent: b\n- name: b\n  parent: a\n"), 0o644))
	out, err := nestctl(ctx, "playground", "up", "--config", bad, "--dir", dir)
	require.Error(t, err)
	require.Contains(t, out, "a -> b -> a")
	require.NoDirExists(t, dir)
	foreign := filepath.Join(work, "foreign")
	require.NoError(t, os.MkdirAll(foreign, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "precious"), nil, 0o644))
	out, err = nestctl(ctx, "playground", "up", "--config", config, "--dir", foreign)
	require.Error(t, err)
	require.Contains(t, out, "is not a playground directory")
	out, err = nestctl(ctx, "playground", "down", "--dir", foreign)
	require.Error(t, err, out)
	require.FileExists(t, filepath.Join(foreign, "precious"))

	// Whatever happens, down runs; on failure the logs' last lines first.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if s, err := launcher.ReadState(dir); t.Failed() && err == nil {
			for _, p := range s.Processes {
				tail, _ := run(ctx, "tail", "-n", "20", p.Log)
				t.Logf("=== %s\n%s", p.Name, tail)
			}
		}
		if out, err := nestctl(ctx, "playground", "down", "--dir", dir); err != nil {
			t.Errorf("playground down: %v\n%s", err, out)
		}
	})

	start := time.Now()
	out, err = nestctl(ctx, "playground", "up", "--config", config, "--dir", dir,
		"--bin-dir", binDir, "--nestlet-bin-dir", bins.Dir, "--report-frequency", "2s", "--timeout", "5m")
	require.NoError(t, err, out)
	t.Logf("playground up took %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	for _, line := range []string{"starting 2 clusters", "child ready", "joining child -> root", "child joined root",
		"export KUBECONFIG=" + filepath.Join(dir, "kubeconfig")} {
		require.Contains(t, out, line)
	}
	// Each cluster a host of its own, printed with what it admits.
	hostLine := regexp.MustCompile(`host of (root|child) +(10\.250\.\d+\.\d+) +region (test|-) +(.*)`)
	hosts := map[string]string{}
	for _, m := range hostLine.FindAllStringSubmatch(out, -1) {
		hosts[m[1]] = m[2]
		if m[1] == "child" {
			require.Equal(t, "test", m[3])
			require.Contains(t, m[4], "behind NAT")
		}
	}
	require.Len(t, hosts, 2, "up printed no host per cluster:\n%s", out)
	netnsBefore, err := run(ctx, "ip", "netns", "list")
	require.NoError(t, err)

	// nestctl has exited; every process it started runs on, recorded.
	state, err := launcher.ReadState(dir)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, p := range state.Processes {
		names[p.Name] = true
		require.True(t, p.Alive(), "%s (pid %d) is not running after up returned", p.Name, p.PID)
		require.FileExists(t, p.Log)
	}
	for _, want := range []string{"etcd", "root/kube-apiserver", "child/kwok", "root-nestlet", "child-nestlet"} {
		require.True(t, names[want], "state file lists %s: %v", want, names)
	}
	require.NotNil(t, state.Cluster("root"))
	require.NotNil(t, state.Cluster("child"))

	// Nestlet's components run under their own ServiceAccounts with the
	// permissions their programs print, as the chart grants them, not as
	// admin.
	identities := 0
	for _, p := range state.Processes {
		want := map[string]string{"root-nestlet": "nestlet-agent", "child-nestlet": "nestlet-agent", "root-nestlet-proxy": "nestlet-proxy"}[p.Name]
		if want == "" {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		require.NoError(t, err)
		var kubeconfig string
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			if v, ok := strings.CutPrefix(arg, "--kubeconfig="); ok {
				kubeconfig = v
			}
		}
		require.NotEmpty(t, kubeconfig, "%s has no --kubeconfig: %q", p.Name, cmdline)
		out, err := run(ctx, cp.Kubectl, "--kubeconfig", kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		require.NoError(t, err, out)
		require.Equal(t, "system:serviceaccount:nestlet-system:"+want, out, "%s runs as", p.Name)
		identities++
	}
	require.Equal(t, 3, identities, "agents and proxies found among %v", names)

	// The child is a Ready node with ROLES cluster at the root.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	out, err = run(ctx, cp.Kubectl, "--kubeconfig", kubeconfig, "get", "nodes")
	require.NoError(t, err, out)
	found := false
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "child" {
			found = true
			require.Equal(t, []string{"Ready", "cluster"}, f[1:3], line)
		}
	}
	require.True(t, found, "kubectl get nodes lists child:\n%s", out)

	// A pod selecting the child's region runs there.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"topology.kubernetes.io/region": "test"},
			Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	_, err = client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: "nestlet-test"})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "the pod Running on child", func(ctx context.Context) (bool, string) {
		p, err := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName == "child" && p.Status.Phase == corev1.PodRunning, fmt.Sprintf("pod on %q in phase %s", p.Spec.NodeName, p.Status.Phase)
	})

	// down stops every recorded process and removes the directory; again,
	// it says there is nothing to stop.
	out, err = nestctl(ctx, "playground", "down", "--dir", dir)
	require.NoError(t, err, out)
	require.Contains(t, out, "stopping")
	for _, p := range state.Processes {
		require.False(t, p.Alive(), "%s (pid %d) survived playground down", p.Name, p.PID)
	}
	require.NoDirExists(t, dir)
	// Its hosts are gone with it: none of the namespaces it had is left.
	netnsAfter, err := run(ctx, "ip", "netns", "list")
	require.NoError(t, err)
	for _, line := range strings.Split(netnsBefore, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "nestlet-") {
			require.NotContains(t, strings.Fields(netnsAfter), f[0], "namespace %s survived playground down", f[0])
		}
	}
	out, err = nestctl(ctx, "playground", "down", "--dir", dir)
	require.NoError(t, err, out)
	require.Contains(t, out, "nothing to stop")
}
