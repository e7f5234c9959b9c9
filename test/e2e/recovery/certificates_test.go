package recovery

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/test/framework"
)

// expiry returns when the node certificate of child's Target expires.
func expiry(ctx context.Context, child string) (time.Time, error) {
	targets, err := v1alpha1.NewTargetClient(env.Cluster(child).Config)
	if err != nil {
		return time.Time{}, err
	}
	tg, err := targets.Get(ctx, tree.Targets[child], metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if tg.Status.CertificateExpiry == nil {
		return time.Time{}, fmt.Errorf("target of %s has no certificate expiry", child)
	}
	return tg.Status.CertificateExpiry.Time, nil
}

// watchReadiness records every time a child's virtual node is seen not
// Ready in its parent, polling each every 200 ms until ctx ends, and
// returns what it saw so far.
func watchReadiness(ctx context.Context) func() []string {
	var mu sync.Mutex
	var seen []string
	go func() {
		for ctx.Err() == nil {
			for _, e := range edges {
				n, err := env.Cluster(e[1]).Client.CoreV1().Nodes().Get(ctx, e[0], metav1.GetOptions{})
				if err != nil {
					continue // a restart test's outage, or the end
				}
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
						mu.Lock()
						seen = append(seen, fmt.Sprintf("%s in %s: %s %s", e[0], e[1], c.Reason, c.Message))
						mu.Unlock()
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// Node certificates of two minutes are renewed in place: both children's
// certificates are renewed while `kubectl logs -f` at the root streams
// from a pod two levels down through both reverse tunnels, the stream
// carries on (never dropped) past the first certificates' expiry, and
// neither virtual node ever goes NotReady.
func TestCertificatesRenewedWithoutDisruption(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	root := env.Cluster("root")
	_, err := root.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"topology.kubernetes.io/zone": "kwok"},
			Containers:   []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	settle(t, ns, 1, 2*time.Minute)
	first := map[string]time.Time{}
	for _, c := range []string{"mid", "leaf"} {
		first[c], err = expiry(ctx, c)
		require.NoError(t, err)
		t.Logf("%s's certificate expires at %s", c, first[c].Format(time.RFC3339))
		require.Less(t, time.Until(first[c]), 3*time.Minute, "%s's certificate is short-lived", c)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	notReady := watchReadiness(watchCtx)

	appendLog(t, "before the renewals")
	streamCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(streamCtx, env.Binaries.Kubectl, "--kubeconfig", root.KubeconfigPath, "logs", "-f", "--tail=1", "-n", ns, "app")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	next := func(what string) {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the stream ended before %q", what)
			require.Equal(t, what, l)
		case <-time.After(30 * time.Second):
			t.Fatalf("no line %q within 30 s", what)
		}
	}
	next("before the renewals")

	// Both renewed (each once at least), a line through the stream each
	// time one is seen.
	renewed := map[string]time.Time{}
	framework.EventuallyEvery(t, time.Second, 3*time.Minute, "both certificates renewed", func(ctx context.Context) (bool, string) {
		for _, c := range []string{"mid", "leaf"} {
			if _, done := renewed[c]; done {
				continue
			}
			at, err := expiry(ctx, c)
			if err == nil && at.After(first[c]) {
				renewed[c] = at
				line := fmt.Sprintf("after %s's renewal", c)
				appendLog(t, line)
				next(line)
			}
		}
		return len(renewed) == 2, fmt.Sprintf("renewed: %v", renewed)
	})
	// The stream began on the tunnels of the first certificates: it
	// goes on past their expiry (the proxies keep a tunnel that drains
	// while its successor's certificate is valid).
	expired := first["mid"]
	if first["leaf"].After(expired) {
		expired = first["leaf"]
	}
	expired = expired.Add(3 * time.Second)
	t.Logf("waiting until the first certificates expired (%s)", time.Until(expired).Round(time.Second))
	select {
	case <-time.After(time.Until(expired)):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	appendLog(t, "after the first certificates expired")
	next("after the first certificates expired")
	require.NoError(t, streamCtx.Err(), "the stream lasted")
	stopWatch()
	require.Empty(t, notReady(), "no virtual node went NotReady across the renewals")
	settle(t, ns, 1, time.Minute)
	t.Logf("renewed: %v, one stream throughout", renewed)
}

// appendLog appends a line to the leaf's kwok log file (every kwok
// container's logs), in the CRI format kwok reads.
func appendLog(t testing.TB, line string) {
	t.Helper()
	f, err := os.OpenFile(env.Cluster("leaf").KwokLogsFile, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	_, err = fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), line)
	require.NoError(t, err)
}
