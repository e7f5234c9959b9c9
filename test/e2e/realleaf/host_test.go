package realleaf

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestSecondNodeThenCrashLeavesNothing: a second real node starts beside
// the first (its own bridge, subnet, cgroup and runtime) and runs a pod;
// then its kubelet and containerd are killed with SIGKILL, as when the
// program that started them dies, leaving the pod's shim and container
// running. Stopping the node must still remove every process, mount,
// interface, cgroup and nftables rule it made.
func TestSecondNodeThenCrashLeavesNothing(t *testing.T) {
	ns := newNamespace(t)
	leaf := env.Cluster("leaf")
	require.NoError(t, leaf.EnsureNamespace(t.Context(), ns))
	taint := corev1.Taint{Key: "nestlet.io/test", Value: "crash", Effect: corev1.TaintEffectNoSchedule}
	n2, err := leaf.AddRealNode(t.Context(), launcher.RealNodeOptions{Name: "leaf-real-2", Taints: []corev1.Taint{taint}})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = n2.Stop()
		_ = leaf.Client.CoreV1().Nodes().Delete(t.Context(), n2.Name, metav1.DeleteOptions{})
	})
	n1 := realNode()
	if n2.Netns != "" {
		// A namespace of its own: it runs kube-proxy beside the first.
		require.NotEqual(t, n1.Netns, n2.Netns)
		require.NotNil(t, n2.KubeProxy, "the second node runs no kube-proxy")
		require.NotNil(t, n1.KubeProxy, "the first node runs no kube-proxy")
	}
	require.NotEqual(t, n1.PodCIDR, n2.PodCIDR)
	require.NotEqual(t, n1.Bridge, n2.Bridge)

	// A pod on it, created in the leaf itself.
	spec := appPodSpec()
	spec.NodeSelector = nil
	spec.NodeName = n2.Name
	spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpExists}}
	_, err = leaf.Client.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "victim"}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.Eventually(t, 2*time.Minute, "the pod on the second real node Ready", func(ctx context.Context) (bool, string) {
		p, err := leaf.Client.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return podReady(p), fmt.Sprintf("phase %s", p.Status.Phase)
	})
	socket := strings.TrimPrefix(n2.RuntimeEndpoint, "unix://")
	runDir := filepath.Dir(socket)
	require.NotEmpty(t, processesNaming(socket), "no shim of the second node found")
	require.NotEmpty(t, append(mountsUnder(n2.Dir), mountsUnder(runDir)...))

	prefix := strings.TrimSuffix(n2.PodCIDR, "0/24")
	out, err := onNode(n2, "nft", "list", "ruleset").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), prefix, "no nftables rule of the pod (masquerading)")

	// The crash: the runtime's own processes die at once.
	for _, p := range []*launcher.Process{n2.Kubelet, n2.Containerd} {
		require.NoError(t, syscall.Kill(-p.PID(), syscall.SIGKILL))
	}
	require.NoError(t, n2.Stop())

	if n2.Netns != "" {
		// Its bridge, veths, routes and nftables rules were in it.
		_, err = os.Stat(filepath.Join("/run/netns", n2.Netns))
		require.True(t, os.IsNotExist(err), "network namespace %s left", n2.Netns)
		out, err := exec.Command("ip", "-n", env.Cluster("leaf").Host.Netns, "-br", "link").Output()
		require.NoError(t, err)
		require.NotContains(t, string(out), n2.HostLink+"@", "the host's end of the node's link left")
		require.Contains(t, string(out), n1.HostLink+"@", "the first node's link went too")
	}
	_, err = os.Stat(filepath.Join("/sys/class/net", n2.Bridge))
	require.True(t, os.IsNotExist(err), "bridge %s left", n2.Bridge)
	cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", n2.CgroupRoot))
	require.Empty(t, cgroups, "cgroups left")
	require.Empty(t, append(mountsUnder(n2.Dir), mountsUnder(runDir)...), "mounts left")
	require.Empty(t, processesNaming(socket), "shims left")
	out, _ = exec.Command("nft", "list", "ruleset").Output()
	require.NotContains(t, string(out), prefix, "nftables rules naming the node's subnet left")

	// The first node is untouched.
	require.NoError(t, onNode(n1, "ip", "link", "show", n1.Bridge).Run(), "the first node's bridge went too")
}

// onNode is a command run in the network of node n (its namespace, on
// hosts).
func onNode(n *launcher.RealNode, prog string, args ...string) *exec.Cmd {
	if n.Netns == "" {
		return exec.Command(prog, args...)
	}
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + n.Netns, "--", prog}, args...)...)
}

// mountsUnder returns the mount points under dir.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	return out
}

// processesNaming returns the command lines that contain s (the node's
// shims name its containerd socket).
func processesNaming(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || e.Name() == "self" {
			continue
		}
		if cmd := strings.ReplaceAll(string(data), "\x00", " "); strings.Contains(cmd, s) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}
