package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// suite is what the probes share: the hostile child (east) as the root
// sees it, with the credential east's agent holds there.
type suite struct {
	root *launcher.Cluster
	// hostile is a client of the root with east's node certificate, and
	// cfg its configuration.
	hostile kubernetes.Interface
	cfg     *rest.Config
	// cert is east's node certificate, rootCAs verify the root's servers.
	cert    tls.Certificate
	rootCAs *x509.CertPool
	// ns is a namespace of the root for the probes' pods.
	ns string
	// cutoff is how long a revoked child's tunnel lived after `nestctl
	// revoke` returned (the revocation probe).
	cutoff time.Duration
}

func newSuite(tb testing.TB) *suite {
	tb.Helper()
	ctx := tb.Context()
	waitWhole(tb)
	root := env.Cluster("root")
	cfg, sec, err := framework.ChildNodeConfig(ctx, env.Cluster("east"), root, targetOf["east"])
	require.NoError(tb, err)
	cert, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	require.NoError(tb, err)
	pool := x509.NewCertPool()
	require.True(tb, pool.AppendCertsFromPEM(sec.Data["ca.crt"]))
	ns := framework.KeptNamespace(tb, root.Client, "probe")
	return &suite{root: root, hostile: kubernetes.NewForConfigOrDie(cfg), cfg: cfg, cert: cert, rootCAs: pool, ns: ns}
}

// waitWhole waits until east and west are Ready nodes of the root,
// without a lifecycle taint (a probe before may have frozen east's agent
// or revoked it for a while).
func waitWhole(tb testing.TB) {
	tb.Helper()
	framework.Eventually(tb, 3*time.Minute, "east and west Ready in root", func(ctx context.Context) (bool, string) {
		for _, name := range []string{"east", "west"} {
			n, err := env.Cluster("root").Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !launcher.NodeReady(n) {
				return false, name + " is not Ready"
			}
			for _, t := range n.Spec.Taints {
				if t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady {
					return false, name + " is tainted " + t.Key
				}
			}
		}
		return true, ""
	})
}

// freeze stops east's agent (SIGSTOP) so that what the hostile child
// writes stays as written, and returns the function that lets it go on
// (also run at cleanup). Keep it short: a node whose lease is not
// renewed for 40 s goes NotReady.
func freeze(tb testing.TB) func() {
	tb.Helper()
	p := env.Cluster("east").Process("east-nestlet")
	if p == nil {
		for _, q := range env.Processes() {
			if q.Name == "east-nestlet" {
				p = q
			}
		}
	}
	require.NotNil(tb, p, "east's agent")
	require.NoError(tb, syscall.Kill(p.PID(), syscall.SIGSTOP))
	var once sync.Once
	thaw := func() { once.Do(func() { _ = syscall.Kill(p.PID(), syscall.SIGCONT) }) }
	tb.Cleanup(thaw)
	return thaw
}

// pod creates a pod of the root in the probes' namespace with
// nodeSelector, requesting nothing.
func (s *suite) pod(tb testing.TB, name string, nodeSelector map[string]string) {
	tb.Helper()
	s.podRequesting(tb, name, nodeSelector, resource.Quantity{})
}

// podRequesting creates a pod of the root in the probes' namespace with
// nodeSelector, its container requesting cpu (nothing when zero).
func (s *suite) podRequesting(tb testing.TB, name string, nodeSelector map[string]string, cpu resource.Quantity) {
	tb.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if !cpu.IsZero() {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: cpu}
	}
	_, err := s.root.Client.CoreV1().Pods(s.ns).Create(tb.Context(), p, metav1.CreateOptions{})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		_ = s.root.Client.CoreV1().Pods(s.ns).Delete(context.Background(), name, *metav1.NewDeleteOptions(0))
	})
}

// placement waits until the pod is bound (its node) or the scheduler
// said it fits nowhere ("", with its message).
func (s *suite) placement(tb testing.TB, name string) (node, unschedulable string) {
	tb.Helper()
	framework.Eventually(tb, 2*time.Minute, "pod "+name+" bound or refused by the scheduler", func(ctx context.Context) (bool, string) {
		p, err := s.root.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if node = chosen(p); node != "" {
			return true, ""
		}
		evs, err := s.root.Client.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": name, "reason": "FailedScheduling"}.AsSelector().String()})
		if err == nil && len(evs.Items) > 0 {
			unschedulable = evs.Items[0].Message
			return true, ""
		}
		return false, fmt.Sprintf("not bound, no FailedScheduling event (%v)", err)
	})
	return node, unschedulable
}

// boundTo waits until the scheduler chose node for the pod (chosen).
func (s *suite) boundTo(tb testing.TB, name, node string) {
	tb.Helper()
	framework.Eventually(tb, 2*time.Minute, fmt.Sprintf("pod %s bound to %s", name, node), func(ctx context.Context) (bool, string) {
		p, err := s.root.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return chosen(p) == node, fmt.Sprintf("bound to %q, nominated %q", p.Spec.NodeName, p.Status.NominatedNodeName)
	})
}

// chosen is the node the root's scheduler chose for p: where it is bound,
// or, while the scheduler waits at Permit for the child's place
// (placement by reservation; a frozen agent never answers), the node it
// nominated (kube-scheduler sets status.nominatedNodeName then, with the
// gate the root's scheduler is given in TestMain).
func chosen(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	return p.Status.NominatedNodeName
}

// writeSummary writes raw as east's summary, as east (its own node's
// annotation, which a node may write).
func (s *suite) writeSummary(tb testing.TB, raw string) {
	tb.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{api.AnnotationSummary: raw}}})
	require.NoError(tb, err)
	_, err = s.hostile.CoreV1().Nodes().Patch(tb.Context(), "east", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(tb, err, "a node may write its own annotations")
}

// eastSummary is east's summary as the root holds it.
func (s *suite) eastSummary(tb testing.TB) api.Summary {
	tb.Helper()
	n, err := s.root.Client.CoreV1().Nodes().Get(tb.Context(), "east", metav1.GetOptions{})
	require.NoError(tb, err)
	sum, ok := api.ParseSummary(n)
	require.True(tb, ok, "east has a summary")
	require.NotEmpty(tb, sum.Groups)
	return *sum
}

// withGroupLabels is sum with labels added to every group (and their keys
// to the group keys).
func withGroupLabels(sum api.Summary, labels map[string]string) api.Summary {
	out := sum
	out.GroupKeys = append([]string(nil), sum.GroupKeys...)
	out.Groups = append([]api.Group(nil), sum.Groups...)
	for k := range labels {
		out.GroupKeys = append(out.GroupKeys, k)
	}
	for i := range out.Groups {
		l := map[string]string{}
		for k, v := range out.Groups[i].Labels {
			l[k] = v
		}
		for k, v := range labels {
			l[k] = v
		}
		out.Groups[i].Labels = l
	}
	return out
}

// tunnelURL is where children dial the root's nestlet-proxy.
func (s *suite) tunnelURL(tb testing.TB) string {
	tb.Helper()
	cm, err := s.root.Client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(tb.Context(), api.ClusterInfoConfigMap, metav1.GetOptions{})
	require.NoError(tb, err)
	url := cm.Data[api.ClusterInfoProxyTunnelURL]
	require.NotEmpty(tb, url, "the root publishes its proxy")
	return url
}

// dialTunnel opens a tunnel to the root's proxy with cert; the status
// code of the answer, and the connection when it was upgraded.
func (s *suite) dialTunnel(tb testing.TB, cert tls.Certificate) (int, *websocket.Conn) {
	tb.Helper()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // the proxy's own certificate is not under test here
	}}
	ws, resp, err := d.DialContext(tb.Context(), s.tunnelURL(tb), http.Header{})
	require.NotNil(tb, resp, "dialing the tunnel: %v", err)
	if resp.Body != nil {
		_ = resp.Body.Close()
	}
	return resp.StatusCode, ws
}

// forbidden is nil when err is the API server's 403, else what happened.
func forbidden(what string, err error) error {
	if err == nil {
		return fmt.Errorf("%s: accepted", what)
	}
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("%s: refused, but not as forbidden: %w", what, err)
	}
	return nil
}
