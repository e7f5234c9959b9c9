package realleaf

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// BenchmarkTokenRefresh measures what keeping a pod's API identity from
// the cluster it was made in costs (agents with --pod-api=origin): 10 pods
// made at the root, running two levels down, each with a 10-minute token,
// are watched through the scheduled refresh at half its life (no restart,
// no shortcut): the API requests it makes at the root (TokenRequests) and
// the writes of the pods' identity Secrets in mid and the leaf, from a
// reading after every pod runs to a reading after every pod's Secret in
// the leaf changed. Reported per pod and refresh, and per pod and hour for
// the 1-hour token admission gives a pod by default (refreshed every half
// hour). The run lasts the token's half life, some 5 minutes.
//
//	go test ./test/e2e/realleaf -run '^$' -bench TokenRefresh -benchtime 1x
func BenchmarkTokenRefresh(b *testing.B) {
	framework.NeedRealNodes(b)
	const pods, seconds = 10, 600
	ctx := b.Context()
	for b.Loop() {
		ns := fmt.Sprintf("bench-token-%d", time.Now().UnixNano()%1_000_000)
		root := env.Cluster("root")
		if err := root.EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
		for i := range pods {
			pod := withToken(appPod(fmt.Sprintf("token-%d", i)), seconds)
			if _, err := root.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		for i := range pods {
			if err := waitReady(ctx, root.Client, ns, fmt.Sprintf("token-%d", i)); err != nil {
				b.Fatal(err)
			}
		}
		leafSecrets := identitySecrets(ctx, b, env.Cluster("leaf"), ns)
		if len(leafSecrets) != pods {
			b.Fatalf("%d identity Secrets in the leaf, want %d", len(leafSecrets), pods)
		}
		clusters := []*launcher.Cluster{root, env.Cluster("mid"), env.Cluster("leaf")}
		before := requestsOf(ctx, b, clusters)
		start := time.Now()
		b.StopTimer()
		err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 2*seconds*time.Second, false, func(ctx context.Context) (bool, error) {
			now := identitySecrets(ctx, b, env.Cluster("leaf"), ns)
			for name, rv := range leafSecrets {
				if now[name] == rv {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			b.Fatalf("the identity Secrets in the leaf did not all change within %ds", 2*seconds)
		}
		after := requestsOf(ctx, b, clusters)
		b.StartTimer()
		tokens := after[0]["serviceaccounts/token-POST"] - before[0]["serviceaccounts/token-POST"]
		writes := func(i int) float64 {
			n := 0.0
			for k, v := range after[i] {
				if strings.HasPrefix(k, "secrets-") && framework.IsWrite(k) && v > before[i][k] {
					b.Logf("%s: %s +%.0f", clusters[i].Name, k, v-before[i][k])
					n += v - before[i][k]
				}
			}
			return n
		}
		perHour := 3600 / (0.5 * 3607) // admission's token, refreshed at half its life
		secretWrites := writes(1) + writes(2)
		b.ReportMetric(tokens/pods, "token-requests-per-pod-refresh")
		b.ReportMetric(secretWrites/pods, "identity-secret-writes-per-pod-refresh")
		b.ReportMetric((tokens+secretWrites)/pods*perHour, "token-refresh-requests-per-pod-hour")
		b.ReportMetric(time.Since(start).Seconds(), "token-refresh-seen-after-s")
		removeNamespace(b, ns)
	}
	b.ReportMetric(0, "ns/op")
}

// identitySecrets returns the resource versions of the identity Secrets of
// ns in c, by name.
func identitySecrets(ctx context.Context, b *testing.B, c *launcher.Cluster, ns string) map[string]string {
	b.Helper()
	list, err := c.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, "nestlet-identity-") { // the Secret and its copies below
			out[s.Name] = s.ResourceVersion
		}
	}
	return out
}

// requestsOf reads each cluster's API request counts, in order.
func requestsOf(ctx context.Context, b *testing.B, clusters []*launcher.Cluster) []map[string]float64 {
	b.Helper()
	out := make([]map[string]float64, len(clusters))
	for i, c := range clusters {
		r, err := framework.Requests(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = r
	}
	return out
}
