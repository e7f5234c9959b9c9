package watermark

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/nestlet/nestlet/api"
)

// benchNodes is the SchedulerVsStock layout's size: 500 real nodes with
// 10 pods each, and 20 virtual nodes, each summarising 8 groups (regions
// and zones) of 25 nodes with 1,000 pods bound since their last report.
func benchNodes(b *testing.B) []*framework.NodeInfo {
	b.Helper()
	var out []*framework.NodeInfo
	for i := range 500 {
		var pods []*corev1.Pod
		for j := range 10 {
			pods = append(pods, cpuPod(fmt.Sprintf("r%d-%d", i, j), "100m").Obj())
		}
		n := realNode(fmt.Sprintf("real-%d", i), "16", "110")
		n.Labels = map[string]string{regionKey: fmt.Sprintf("r%d", i%4)}
		out = append(out, nodeInfo(n, pods...))
	}
	for i := range 20 {
		var groups []api.Group
		for g := range 8 {
			grp := regionGroup(fmt.Sprintf("r%d", g%4), shapes("8", "8", "6", "4"))
			grp.Labels[corev1.LabelTopologyZone] = fmt.Sprintf("z%d", g)
			groups = append(groups, grp)
		}
		s := summaryOf(groups...)
		raw, err := json.Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		n := st.MakeNode().Name(fmt.Sprintf("vn-%d", i)).Label(api.LabelCluster, fmt.Sprintf("child-%d", i)).
			Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "400", corev1.ResourceMemory: "4Ti", corev1.ResourcePods: "5000"}).
			Taints([]corev1.Taint{providerTaint}).Annotation(api.AnnotationSummary, string(raw)).Obj()
		var pods []*corev1.Pod
		for j := range 1000 {
			pods = append(pods, after(fmt.Sprintf("v%d-%d", i, j), "10m"))
		}
		out = append(out, nodeInfo(n, pods...))
	}
	return out
}

// BenchmarkFilter is one scheduling cycle's PreFilter and Filter of a pod
// with a region selector over benchNodes, as the scheduler runs them.
//
//	go test ./scheduler-plugins/watermark -run '^$' -bench Filter -cpuprofile /tmp/wm.prof
func BenchmarkFilter(b *testing.B) {
	nodes := benchNodes(b)
	pl, err := New(context.Background(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	wm := pl.(*Watermark)
	pod := ownedBy(cpuPod("p", "200m"), "rs-1").NodeSelector(map[string]string{regionKey: "r1"}).Obj()
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
	b.ResetTimer()
	for b.Loop() {
		state := framework.NewCycleState()
		wm.PreFilter(context.Background(), state, pod, nil)
		for _, ni := range nodes {
			if st := wm.Filter(context.Background(), state, pod, ni); st.Code() == fwk.Error {
				b.Fatal(st.AsError())
			}
		}
	}
}
