package realleaf

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	require.NotEqual(t, pod.UID, leafPod(t, pod).UID)

	eventually(t, time.Minute, "the pod lists its namespace's pods at the root", func() (bool, string) {
		out, errOut, err := kubectl(ctx, "", "-n", ns, "exec", "caller", "--", "/demo-app", "kube", "/api/v1/namespaces/"+ns+"/pods")
		return err == nil && strings.HasPrefix(out, "200\n") && strings.Contains(out, string(pod.UID)), fmt.Sprintf("%q %q %v", out, errOut, err)
	})
	out, _, err := kubectl(ctx, "", "-n", ns, "exec", "caller", "--", "/demo-app", "kube", "/api/v1/namespaces/"+ns+"/secrets")
	require.Error(t, err, "listing secrets was allowed: %s", out)
	require.True(t, strings.HasPrefix(out, "403\n"), out)
	require.Contains(t, out, fmt.Sprintf("system:serviceaccount:%s:default", ns))
}
