package watermark

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/quota"
	"github.com/nestlet/nestlet/scheduler-plugins/apis/config"
)

// A child claiming more than its quota gets no more than the quota placed
// on it; a quota that does not parse places nothing (fail closed); a real
// node is not concerned; without a quota the claim counts.
func TestFilterQuota(t *testing.T) {
	// The child claims 64 CPUs, with one node that has them free.
	s := &api.Summary{Cluster: "child", Time: summaryTime.Format(time.RFC3339), Groups: []api.Group{{
		Nodes: 1, Allocatable: shapeOf("64", "1Ti", "1000"), Free: shapeOf("64", "1Ti", "1000"), Shapes: []corev1.ResourceList{shapeOf("64", "1Ti", "1000")},
	}}}
	vn := virtualNode(t, "64", s)
	running := cpuPod("running", "3").Obj()
	tests := []struct {
		name     string
		quotas   map[string]string
		node     *corev1.Node
		pod      *corev1.Pod
		unread   bool
		wantCode fwk.Code
		wantMsg  string
	}{
		{name: "quotas not read yet: nothing goes to a virtual node", unread: true, node: vn, pod: cpuPod("p", "0.5").Obj(),
			wantCode: fwk.Unschedulable, wantMsg: "quotas (configmap kube-system/nestlet-quotas) are not read yet"},
		{name: "within the quota", quotas: map[string]string{"vn-child": "cpu=4"}, node: vn, pod: cpuPod("p", "0.5").Obj()},
		{name: "beyond the quota, within the claim", quotas: map[string]string{"vn-child": "cpu=4"}, node: vn, pod: cpuPod("p", "2").Obj(),
			wantCode: fwk.Unschedulable, wantMsg: "vn-child: its pods would request 5000m of cpu, beyond the quota of 4 its parent set (configmap kube-system/nestlet-quotas): raise it with nestctl quota vn-child cpu=..."},
		{name: "the watermark measures against the quota", quotas: map[string]string{"vn-child": "cpu=4,memory=1Ti"}, node: vn, pod: cpuPod("p", "0.9").Obj(),
			wantCode: fwk.Unschedulable, wantMsg: "above the high watermark"},
		{name: "a quota that does not parse places nothing", quotas: map[string]string{"vn-child": "cpu=lots"}, node: vn, pod: cpuPod("p", "1").Obj(),
			wantCode: fwk.Unschedulable, wantMsg: "quota of vn-child in configmap kube-system/nestlet-quotas"},
		{name: "no quota: the claim counts", node: vn, pod: cpuPod("p", "32").Obj()},
		{name: "a real node has no quota", quotas: map[string]string{"real": "cpu=1"}, node: realNode("real", "64", "110"), pod: cpuPod("p", "8").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Watermark at 95 percent of CPU: 3 + 0.9 of a 4-CPU quota passes it.
			pl := newPlugin(t, &config.WatermarkArgs{HighWatermark: map[corev1.ResourceName]float64{corev1.ResourceCPU: 0.95}, Mode: Spread})
			pl.quotas = quota.New(nil)
			pl.quotas.Set(tt.quotas)
			if tt.unread {
				pl.quotas = quota.New(fake.NewClientset()) // never run: never read
			}
			got := filter(pl, tt.pod, nodeInfo(tt.node, running))
			require.Equal(t, tt.wantCode, got.Code(), got.Message())
			if tt.wantMsg != "" {
				require.Contains(t, got.Message(), tt.wantMsg)
			}
		})
	}
}
