package parent

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/quota"
)

// The parent's agent warns once when a child claims more than its quota,
// and again after it came back within it; a quota that does not parse is
// warned about too; a child without a quota is believed.
func TestChildQuotas(t *testing.T) {
	events := record.NewFakeRecorder(10)
	w := quota.New(nil)
	c := &childQuotas{quotas: w, recorder: events, warned: map[string]string{}}
	node := func(cpu string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{api.LabelCluster: "east"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi")}}}
	}
	c.check(node("64"))
	require.Empty(t, events.Events, "no quota: believed")
	w.Set(map[string]string{"east": "cpu=4,memory=8Gi"})
	c.check(node("4"))
	require.Empty(t, events.Events, "within its quota")
	c.check(node("64"))
	require.Len(t, events.Events, 1)
	require.Contains(t, <-events.Events, "Warning OverQuota the child claims cpu 64 > 4, beyond the quota its parent set")
	c.check(node("64"))
	require.Empty(t, events.Events, "warned once for the same claim")
	c.check(node("4"))
	c.check(node("64"))
	require.Len(t, events.Events, 1, "warned again after it came back within its quota")
	<-events.Events
	w.Set(map[string]string{"east": "cpu=plenty"})
	c.check(node("4"))
	require.Contains(t, <-events.Events, "Warning QuotaInvalid quota of east in configmap kube-system/nestlet-quotas")
}
