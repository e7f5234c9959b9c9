package permissionstest

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nestlet/nestlet/pkg/permissions"
)

func TestDenied(t *testing.T) {
	rules := []permissions.Rule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "create"}},
		{APIGroups: []string{"scheduling.k8s.io"}, Resources: []string{"priorityclasses"}, Verbs: []string{"create"}},
		{Namespace: permissions.ReleaseNamespace, APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update"}},
		{Namespace: "kube-public", APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"info"}, Verbs: []string{"watch"}},
	}
	c := fake.NewClientset()
	ctx := t.Context()
	_, _ = c.CoreV1().Pods("app").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{})
	_, _ = c.CoreV1().Pods("app").Get(ctx, "p", metav1.GetOptions{})
	_, _ = c.SchedulingV1().PriorityClasses().Get(ctx, "high", metav1.GetOptions{})
	_, _ = c.CoreV1().ConfigMaps("nestlet").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ledger", Namespace: "nestlet"}}, metav1.UpdateOptions{})
	_, _ = c.CoreV1().ConfigMaps("app").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "app"}}, metav1.UpdateOptions{})
	_, _ = c.CoreV1().ConfigMaps("kube-public").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "info").String()})
	_, _ = c.CoreV1().ConfigMaps("kube-public").Watch(ctx, metav1.ListOptions{})
	require.Equal(t, []string{
		"get priorityclasses.scheduling.k8s.io named high",
		"update configmaps in app named x",
		"watch configmaps in kube-public",
	}, Denied(rules, "nestlet", c.Actions()))
}
