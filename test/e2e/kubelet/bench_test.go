package kubelet

import (
	"bytes"
	"io"
	"net/url"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/nestlet/nestlet/launcher"
)

// BenchmarkKubeletAPI measures, from the root, the time to the first byte
// of `logs` and the round trip of an `exec` for a pod two levels down
// (root proxy -> east tunnel -> east proxy -> east-1 tunnel -> kwok), and
// the same calls made directly in the leaf for the same pod, in the same
// run.
func BenchmarkKubeletAPI(b *testing.B) {
	const n = 30
	ns, leaf, leafPod := runPod(b, "east")
	appendLog(b, leaf, time.Now(), "bench line")
	root, leafC := env.Cluster("root"), env.Cluster(leaf)
	for b.Loop() {
		var viaRoot, direct, execRoot, execLeaf []float64
		for range n {
			viaRoot = append(viaRoot, firstLogByte(b, root, ns, "app"))
			direct = append(direct, firstLogByte(b, leafC, ns, leafPod))
			execRoot = append(execRoot, execRoundTrip(b, root, ns, "app"))
			execLeaf = append(execLeaf, execRoundTrip(b, leafC, ns, leafPod))
		}
		b.ReportMetric(quantile(viaRoot, 0.5), "logs-first-byte-2hop-p50-ms")
		b.ReportMetric(quantile(viaRoot, 0.99), "logs-first-byte-2hop-p99-ms")
		b.ReportMetric(quantile(direct, 0.5), "logs-first-byte-leaf-p50-ms")
		b.ReportMetric(quantile(direct, 0.99), "logs-first-byte-leaf-p99-ms")
		b.ReportMetric(quantile(execRoot, 0.5), "exec-2hop-p50-ms")
		b.ReportMetric(quantile(execRoot, 0.99), "exec-2hop-p99-ms")
		b.ReportMetric(quantile(execLeaf, 0.5), "exec-leaf-p50-ms")
		b.ReportMetric(quantile(execLeaf, 0.99), "exec-leaf-p99-ms")
	}
}

// firstLogByte returns the milliseconds from asking for the logs of pod
// in c to reading their first byte.
func firstLogByte(b *testing.B, c *launcher.Cluster, ns, pod string) float64 {
	start := time.Now()
	rc, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).Stream(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if _, err := io.ReadFull(rc, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	return ms(time.Since(start))
}

// execRoundTrip returns the milliseconds an `echo` in pod of c takes, from
// the request to its output and exit status, as kubectl runs it
// (WebSocket, falling back to SPDY).
func execRoundTrip(b *testing.B, c *launcher.Cluster, ns, pod string) float64 {
	u := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "app", Command: []string{"echo", "hi"}, Stdout: true, Stderr: true}, scheme.ParameterCodec).URL()
	start := time.Now()
	exec, err := executor(c.Config, u)
	if err != nil {
		b.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := exec.StreamWithContext(b.Context(), remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		b.Fatalf("exec in %s: %v: %s", c.Name, err, errOut.String())
	}
	if out.String() != "hi\n" {
		b.Fatalf("exec in %s printed %q", c.Name, out.String())
	}
	return ms(time.Since(start))
}

func executor(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile of xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
