package tree

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/nestlet/nestlet/test/framework"
)

// TestDemoDeployments: the demo's Deployments, applied unchanged at the root
// with kubectl, run as real containers where they ask: east-only in the
// leaves of east, spread three and three over the regions, each root pod
// carrying its leaf pod's address.
func TestDemoDeployments(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	mustKubectl(t, "", "-n", ns, "apply", "-f", demoFile("deployments.yaml"))

	wantLeaves := map[string][]string{"east": {"east-1", "east-2"}, "west": {"west-1", "west-2"}}
	for _, c := range []struct {
		app    string
		pods   int
		byNode map[string]int
	}{
		{"east-only", 4, map[string]int{"east": 4}},
		{"spread", 6, map[string]int{"east": 3, "west": 3}},
	} {
		var pods []corev1.Pod
		framework.Eventually(t, 3*time.Minute, fmt.Sprintf("%d Ready pods of %s at the root", c.pods, c.app), func(context.Context) (bool, string) {
			list, err := env.Cluster("root").Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + c.app})
			if err != nil {
				return false, err.Error()
			}
			ready := 0
			for i := range list.Items {
				if podutil.IsPodReady(&list.Items[i]) {
					ready++
				}
			}
			pods = list.Items
			return ready == c.pods && len(list.Items) == c.pods, fmt.Sprintf("%d pods, %d Ready", len(list.Items), ready)
		})
		byNode := map[string]int{}
		for i := range pods {
			p := &pods[i]
			byNode[p.Spec.NodeName]++
			leaf, leafPod, err := leafOf(ctx, p)
			require.NoError(t, err)
			require.Contains(t, wantLeaves[p.Spec.NodeName], leaf, "%s bound to %s at the root runs in %s", p.Name, p.Spec.NodeName, leaf)
			require.NotNil(t, env.Cluster(leaf).RealNode(leafPod.Spec.NodeName), "%s runs on %s in %s, not a real node", p.Name, leafPod.Spec.NodeName, leaf)
			require.Equal(t, leafPod.Status.PodIP, p.Status.PodIP, "the root's pod %s carries its leaf pod's address", p.Name)
		}
		require.Equal(t, c.byNode, byNode, "%s's pods by node at the root", c.app)
	}

	// As make demo shows it: a pod in east calls the Service west-only,
	// served from the other region.
	framework.Eventually(t, 2*time.Minute, "an east-only pod reaches west-only by name", func(context.Context) (bool, string) {
		out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", "deployment/east-only", "--", "/demo-app", "get", "http://west-only/from-east")
		return err == nil && strings.HasPrefix(out, "hello from west-only-"), fmt.Sprintf("%q %q %v", out, errOut, err)
	})
}

// TestEveryLeafFromTheRoot: a pod pinned to each leaf's zone, and a Service
// over the four, made at the root. From the root, for every leaf, two
// levels and two tunnels down: exec (output, exit code, stdin), logs,
// logs -f, attach and port-forward reach the real container; in the leaf,
// the pod resolves the API server's name to the root's, where it was made
// (its gateway's relay: the agents' default --pod-api=auto), and the
// Service by name with the leaf's CoreDNS, and reaches a replica through
// the leaf's kube-proxy.
func TestEveryLeafFromTheRoot(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	labels := map[string]string{"app": "app"}
	_, err := root.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var answers []string
	for _, leaf := range leaves {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-" + leaf, Labels: labels},
			Spec: appSpec(map[string]string{"topology.kubernetes.io/zone": leaf})}
		_, err := root.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		answers = append(answers, "hello from app-"+leaf+"\n")
	}

	for _, leaf := range leaves {
		t.Run(leaf, func(t *testing.T) {
			name := "app-" + leaf
			framework.Eventually(t, 3*time.Minute, name+" Ready at the root", func(context.Context) (bool, string) {
				p, err := root.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return podutil.IsPodReady(p), fmt.Sprint(p.Status)
			})
			p, err := root.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			runsIn, _, err := leafOf(ctx, p)
			require.NoError(t, err)
			require.Equal(t, leaf, runsIn)

			// exec: output, exit codes, stdin to its end.
			require.Equal(t, name+"\n", mustKubectl(t, "", "-n", ns, "exec", name, "--", "/demo-app", "hostname"))
			_, _, err = kubectl(ctx, "root", "", "-n", ns, "exec", name, "--", "/demo-app", "exit", "7")
			require.Equal(t, 7, framework.ExitCode(err), "exit code of `exit 7` in %s: %v", leaf, err)
			require.Equal(t, "one\ntwo\n", mustKubectl(t, "one\ntwo\n", "-n", ns, "exec", "-i", name, "--", "/demo-app", "cat"))

			// logs, port-forward, and the request's line in logs -f and attach.
			require.Contains(t, mustKubectl(t, "", "-n", ns, "logs", name), "demo-app: listening on :8080")
			for _, stream := range [][]string{{"logs", "-f", name}, {"attach", name}} {
				path := fmt.Sprintf("/%s-%s-%d", stream[0], leaf, time.Now().UnixNano())
				streamShows(t, ns, stream, "GET "+path, func() {
					require.Equal(t, "hello from "+name+"\n", framework.PortForwardGet(t, env, env.Cluster("root"), ns, "pod/"+name, "8080", path))
				})
			}

			// Names, from the leaf's CoreDNS; the Service through kube-proxy.
			c := env.Cluster(leaf)
			require.NoError(t, c.WaitClusterDNS(ctx, 2*time.Minute))
			var copyIP string
			framework.Eventually(t, time.Minute, "the copy of Service app in "+leaf, func(context.Context) (bool, string) {
				svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "app", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				copyIP = svc.Spec.ClusterIP
				return true, ""
			})
			resolve := func(host string) string {
				return mustKubectl(t, "", "-n", ns, "exec", name, "--", "/demo-app", "resolve", host)
			}
			require.Equal(t, env.Cluster("root").Host.APIAddress()+"\n", resolve("kubernetes.default.svc.cluster.local"), "the API server of the root, where the pod was made, relayed by its gateway")
			require.Equal(t, copyIP+"\n", resolve("app."+ns+".svc.cluster.local"), "%s's copy of app, by its full name", leaf)
			framework.Eventually(t, time.Minute, "app answers by name in "+leaf, func(context.Context) (bool, string) {
				out, errOut, err := kubectl(ctx, "root", "", "-n", ns, "exec", name, "--", "/demo-app", "get", "http://app/by-name")
				return err == nil && slices.Contains(answers, out), fmt.Sprintf("%q %q %v", out, errOut, err)
			})
		})
	}
}

// streamShows runs kubectl args (a command that streams the pod's output)
// at the root, then act, and waits for a line of the stream containing
// line.
func streamShows(t *testing.T, ns string, args []string, line string, act func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Binaries.Kubectl, append([]string{"--kubeconfig", env.Cluster("root").KubeconfigPath, "-n", ns}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			select {
			case lines <- s.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	// The stream may start reading after act: act until the line comes.
	for {
		act()
		timeout := time.After(5 * time.Second)
		for waiting := true; waiting; {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "kubectl %s ended before %q", strings.Join(args, " "), line)
				if strings.Contains(l, line) {
					return
				}
			case <-timeout:
				waiting = false
			case <-ctx.Done():
				t.Fatalf("kubectl %s: no %q within a minute", strings.Join(args, " "), line)
			}
		}
	}
}
