package realleaf

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestPodCallsTheRootAsItself: a pod made at the root, running two levels
// down, calls the root's API server with a token the root issued for its
// service account: it lists the pods of its namespace there with a Role
// granted at the root (its own pod among them, by the root's UID), and is
// refused what the Role does not grant, in the root's words.
func TestPodCallsTheRootAsItself(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	_, err := root.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = root.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createAt(t, ns, appPod("caller"))
	pod := waitRoot(t, ns, "caller", "Ready", podReady)
	inLeaf := leafPod(t, pod)
	require.NotEqual(t, pod.UID, inLeaf.UID)

	// The root's API server through the tunnels: the name its certificate
	// holds, resolved in the pod to the address the root's gateway relays
	// (the leaf's host may not open connections to the root's).
	relay := env.Cluster("root").Host.APIAddress()
	require.Contains(t, inLeaf.Spec.Containers[0].Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "kubernetes.default.svc"})
	require.Contains(t, inLeaf.Spec.Containers[0].Env, corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: "443"})
	out, errOut, err := kubectl(ctx, "", "-n", ns, "exec", "caller", "--", "/demo-app", "resolve", "kubernetes.default.svc")
	require.NoError(t, err, errOut)
	require.Equal(t, relay, strings.TrimSpace(out))
	out, errOut, err = kubectl(ctx, "", "-n", ns, "exec", "caller", "--", "/demo-app", "get", env.Cluster("root").URL+"/version")
	require.Error(t, err, "the leaf's pod reached the root's URL: %s", out)
	require.Contains(t, errOut, "Client.Timeout exceeded", "dropped by the root's host, not refused by the API server")

	framework.Eventually(t, time.Minute, "the pod lists its namespace's pods at the root", func(context.Context) (bool, string) {
		out, errOut, err := kubectl(ctx, "", "-n", ns, "exec", "caller", "--", "/demo-app", "kube", "/api/v1/namespaces/"+ns+"/pods")
		return err == nil && strings.HasPrefix(out, "200\n") && strings.Contains(out, string(pod.UID)), fmt.Sprintf("%q %q %v", out, errOut, err)
	})
	out, _, err = kubectl(ctx, "", "-n", ns, "exec", "caller", "--", "/demo-app", "kube", "/api/v1/namespaces/"+ns+"/secrets")
	require.Error(t, err, "listing secrets was allowed: %s", out)
	require.True(t, strings.HasPrefix(out, "403\n"), out)
	require.Contains(t, out, fmt.Sprintf("system:serviceaccount:%s:default", ns))
}

// TestPodTokenRotated: a pod made at the root with a 10-minute service
// account token (its own projected volume, in place of the 1-hour one
// admission adds) gets a new token from the root while it runs, in the
// file its container reads, and keeps calling the root with it. The
// token is issued again by mid's agent, which speaks to the root for the
// pods it forwards: at half the token's life, and for every pod at its
// first scan after a restart, which is how this test rotates it without
// waiting five minutes (the half-life schedule itself is unit-tested in
// provider/forward).
func TestPodTokenRotated(t *testing.T) {
	ns := newNamespace(t)
	ctx := t.Context()
	root := env.Cluster("root").Client
	require.NoError(t, grantPodReader(ctx, root, ns))
	createAt(t, ns, withToken(appPod("rotating"), 600))
	waitRoot(t, ns, "rotating", "Ready", podReady)

	token := func() string {
		out, _, err := kubectl(ctx, "", "-n", ns, "exec", "rotating", "--", "/demo-app", "cat", tokenDir+"/token")
		if err != nil {
			return ""
		}
		return strings.TrimSpace(out)
	}
	calls := func(context.Context) (bool, string) {
		out, errOut, err := kubectl(ctx, "", "-n", ns, "exec", "rotating", "--", "/demo-app", "kube", "/api/v1/namespaces/"+ns+"/pods")
		return err == nil && strings.HasPrefix(out, "200\n"), fmt.Sprintf("%q %q %v", out, errOut, err)
	}
	framework.Eventually(t, time.Minute, "the pod lists its namespace's pods at the root", calls)
	first := token()
	require.NotEmpty(t, first)
	_, exp := claims(t, first)
	require.InDelta(t, 600, time.Until(exp).Seconds(), 60, "a 10-minute token")

	var mid *launcher.Process
	for _, p := range env.Processes() {
		if p.Name == "mid-nestlet" && p.Alive() {
			mid = p
		}
	}
	require.NotNil(t, mid, "mid's agent")
	mid.Stop(10 * time.Second)
	restarted := time.Now()
	require.NoError(t, mid.Restart())
	var second string
	framework.Eventually(t, 3*time.Minute, "a new token in the running container", func(context.Context) (bool, string) {
		second = token()
		return second != "" && second != first, "still the first token"
	})
	// Issued after the restart (the claims count whole seconds).
	issued, _ := claims(t, second)
	require.False(t, issued.Before(restarted.Truncate(time.Second)), "the new token was issued at %s, before mid's agent restarted at %s", issued, restarted)
	t.Logf("the new token was in the container %s after mid's agent restarted", time.Since(restarted).Round(time.Millisecond))
	framework.Eventually(t, time.Minute, "the pod lists its namespace's pods at the root with the new token", calls)
}

// claims reads the iat and exp claims of a JWT (not verified: the API
// server does).
func claims(t *testing.T, jwt string) (issued, expires time.Time) {
	t.Helper()
	parts := strings.Split(jwt, ".")
	require.Len(t, parts, 3, "a JWT")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c struct {
		Iat int64 `json:"iat"`
		Exp int64 `json:"exp"`
	}
	require.NoError(t, json.Unmarshal(raw, &c))
	return time.Unix(c.Iat, 0), time.Unix(c.Exp, 0)
}
