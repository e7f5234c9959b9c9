package realleaf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nestlet/nestlet/test/framework"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
)

// runningApp creates a Ready demo app pod at the root and returns its
// namespace and the root's pod.
func runningApp(t *testing.T, args ...string) (string, *corev1.Pod) {
	t.Helper()
	ns := newNamespace(t)
	createAt(t, ns, appPod("app", args...))
	return ns, waitRoot(t, ns, "app", "Ready", podReady)
}

// TestLogsFollow: `kubectl logs -f` at the root streams a line the app
// writes after the stream started (a request made then).
func TestLogsFollow(t *testing.T) {
	ns, pod := runningApp(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, "--kubeconfig", env.Cluster("root").KubeconfigPath, "-n", ns, "logs", "-f", "app")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "no first line from logs -f")
	require.Contains(t, lines.Text(), "demo-app: listening on :8080")

	path := fmt.Sprintf("/after-follow-%d", time.Now().UnixNano())
	resp, err := realNode().HTTPClient().Get("http://" + pod.Status.PodIP + ":8080" + path)
	require.NoError(t, err)
	_ = resp.Body.Close()
	for lines.Scan() {
		if strings.Contains(lines.Text(), "GET "+path) {
			return
		}
	}
	t.Fatalf("logs -f ended without the request's line: %v", lines.Err())
}

// TestCrashLoop: a container that exits 3 after a second shows at the root
// its restarts, its last state with exit code 3, CrashLoopBackOff, and the
// previous run's output with `kubectl logs --previous`.
func TestCrashLoop(t *testing.T) {
	ns := newNamespace(t)
	pod := appPod("crash", "--exit-after=1s", "--exit-code=3")
	pod.Spec.Containers[0].ReadinessProbe = nil
	createAt(t, ns, pod)
	root := waitRoot(t, ns, "crash", "CrashLoopBackOff after a restart", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		s := p.Status.ContainerStatuses[0]
		return s.RestartCount >= 1 && s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff"
	})
	last := root.Status.ContainerStatuses[0].LastTerminationState.Terminated
	require.NotNil(t, last, "no last state at the root")
	require.Equal(t, int32(3), last.ExitCode)
	require.Equal(t, "Error", last.Reason)

	// The leaf's kubelet may answer "unable to retrieve container logs"
	// while the container restarts (its previous run changes then): the
	// call is retried, the previous run's output must come.
	framework.Eventually(t, 30*time.Second, "logs --previous at the root shows the previous run's output", func(context.Context) (bool, string) {
		out, errOut, err := kubectl(t.Context(), "", "-n", ns, "logs", "crash", "--previous")
		return err == nil && strings.Contains(out, "demo-app: exiting with code 3 after 1s"), fmt.Sprintf("%q %q %v", out, errOut, err)
	})

	// The container runs again for a second after each back-off (10 s, then
	// 20 s, ...), and shows Running or Error then: kubectl shows
	// CrashLoopBackOff again once it has exited.
	backOff := regexp.MustCompile(`crash\s+0/1\s+CrashLoopBackOff\s+[1-9]`)
	framework.Eventually(t, 2*time.Minute, "kubectl get at the root shows CrashLoopBackOff", func(context.Context) (bool, string) {
		out, _, _ := kubectl(t.Context(), "", "-n", ns, "get", "pod", "crash")
		return backOff.MatchString(out), out
	})
}

// TestExec: `kubectl exec` at the root runs real commands in the container:
// output, real exit codes, stdin, and a TTY.
func TestExec(t *testing.T) {
	ns, _ := runningApp(t)
	require.Equal(t, "app\n", mustKubectl(t, "", "-n", ns, "exec", "app", "--", "/demo-app", "hostname"))

	for _, code := range []int{0, 7} {
		_, _, err := kubectl(t.Context(), "", "-n", ns, "exec", "app", "--", "/demo-app", "exit", fmt.Sprint(code))
		require.Equal(t, code, framework.ExitCode(err), "exit code of `exit %d`: %v", code, err)
	}
	_, errOut, err := kubectl(t.Context(), "", "-n", ns, "exec", "app", "--", "/no/such/program")
	require.Error(t, err)
	require.Contains(t, errOut, "no such file or directory")

	// stdin, to its end: cat copies all of it and exits.
	require.Equal(t, "line one\nline two\n", mustKubectl(t, "line one\nline two\n", "-n", ns, "exec", "-i", "app", "--", "/demo-app", "cat"))

	// A TTY: the terminal echoes the input and turns \n into \r\n.
	root := env.Cluster("root")
	req := root.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name("app").SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "app", Command: []string{"/demo-app", "cat"}, Stdin: true, Stdout: true, TTY: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(root.Config, "POST", req.URL())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stdinR, stdinW := io.Pipe()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: &out, Tty: true})
	}()
	_, err = stdinW.Write([]byte("typed\n"))
	require.NoError(t, err)
	framework.Eventually(t, 20*time.Second, "the TTY's echo", func(context.Context) (bool, string) {
		return strings.Count(out.String(), "typed\r\n") == 2, fmt.Sprintf("%q", out.String())
	})
	// ^D ends cat's input on a terminal.
	_, _ = stdinW.Write([]byte{4})
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("exec with a TTY did not end after ^D")
	}
}

// TestPortForward: `kubectl port-forward` at the root reaches the app's
// HTTP port in the leaf.
func TestPortForward(t *testing.T) {
	ns, _ := runningApp(t)
	require.Equal(t, "hello from app\n", framework.PortForwardGet(t, env, env.Cluster("root"), ns, "pod/app", "8080", "/through-port-forward"))
	framework.Eventually(t, 30*time.Second, "the forwarded request in the logs", func(context.Context) (bool, string) {
		out, _, _ := kubectl(t.Context(), "", "-n", ns, "logs", "app")
		return strings.Contains(out, "GET /through-port-forward"), out
	})
}

// TestPortForwardServiceAndDeployment: a Deployment and a Service made at
// the root; `kubectl port-forward svc/web` and `deployment/web` there reach
// the app in the leaf, and the root's EndpointSlice lists the address the
// leaf's network gave the pod.
func TestPortForwardServiceAndDeployment(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	webAtRoot(t, ns, 1)

	var pod corev1.Pod
	framework.Eventually(t, 2*time.Minute, "one Ready pod of web at the root", func(context.Context) (bool, string) {
		list, err := root.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(list.Items) != 1 || !podReady(&list.Items[0]) {
			return false, fmt.Sprint(err, list)
		}
		pod = list.Items[0]
		return true, ""
	})
	leaf := leafPod(t, &pod)
	require.Equal(t, leaf.Status.PodIP, pod.Status.PodIP, "the root's pod carries the leaf's IP")
	framework.Eventually(t, time.Minute, "the root's endpoint of web is the leaf pod's address, ready", func(context.Context) (bool, string) {
		slices, err := root.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil || len(slices.Items) != 1 || len(slices.Items[0].Endpoints) != 1 {
			return false, fmt.Sprint(err, slices)
		}
		e := slices.Items[0].Endpoints[0]
		return e.Addresses[0] == leaf.Status.PodIP && ptr.Deref(e.Conditions.Ready, false) && ptr.Deref(e.NodeName, "") == pod.Spec.NodeName, fmt.Sprint(e)
	})

	for _, target := range []string{"svc/web", "deployment/web"} {
		port := map[string]string{"svc/web": "80", "deployment/web": "8080"}[target]
		require.Equal(t, "hello from "+leaf.Name+"\n", framework.PortForwardGet(t, env, env.Cluster("root"), ns, target, port, "/via-"+target), target)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
