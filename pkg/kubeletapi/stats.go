package kubeletapi

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// StatsSummary is the virtual node's /stats/summary: the summaries of this
// cluster's nodes (read through this cluster's API server, each of which
// may be a virtual node answering the same way), with node figures added
// up and only the pods that are delegates of the virtual node's pods, under
// their names in the parent. A node whose summary cannot be read is left
// out (and logged), as a kubelet leaves out a container it cannot stat.
func (s *Server) StatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	var got []*statsv1alpha1.Summary
	parents, err := s.eachNode(ctx, "stats/summary", func(body []byte) error {
		sum := &statsv1alpha1.Summary{}
		if err := json.Unmarshal(body, sum); err != nil {
			return err
		}
		got = append(got, sum)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return mergeSummaries(s.cfg.NodeName, got, parents), nil
}

// eachNode reads path of every node of this cluster through its API server
// (nodes/proxy) and hands each body to use; a node that cannot be read, or
// whose body use refuses, is left out (and logged). It returns the parent
// pods by delegate, for the caller to keep only this virtual node's pods.
func (s *Server) eachNode(ctx context.Context, path string, use func([]byte) error) (map[string]*corev1.Pod, error) {
	nodes, err := s.cfg.Nodes()
	if err != nil {
		return nil, err
	}
	parents, err := s.parentsByDelegate(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		body, err := s.cfg.Child.CoreV1().RESTClient().Get().
			Resource("nodes").Name(n.Name).SubResource("proxy").Suffix(path).
			// What a kubelet serves there (JSON, Prometheus text), not
			// the client's API content types (protobuf).
			SetHeader("Accept", "*/*").DoRaw(ctx)
		if err == nil {
			err = use(body)
		}
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Skipping node", "path", path, "node", n.Name, "err", err)
		}
	}
	return parents, nil
}

// parentsByDelegate maps each delegate (namespace/name) to its parent pod.
func (s *Server) parentsByDelegate(ctx context.Context) (map[string]*corev1.Pod, error) {
	pods, err := s.cfg.Delegates.GetPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	out := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		d, err := s.cfg.Delegates.Delegate(p.Namespace, p.Name)
		if err != nil {
			continue
		}
		out[d.Namespace+"/"+d.Name] = p
	}
	return out, nil
}

// mergeSummaries adds up the node figures of sums under nodeName and keeps
// the pods found in parents, renamed.
func mergeSummaries(nodeName string, sums []*statsv1alpha1.Summary, parents map[string]*corev1.Pod) *statsv1alpha1.Summary {
	out := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: nodeName}}
	for _, sum := range sums {
		n := sum.Node
		if out.Node.StartTime.IsZero() || (!n.StartTime.IsZero() && n.StartTime.Before(&out.Node.StartTime)) {
			out.Node.StartTime = n.StartTime
		}
		out.Node.CPU = addCPU(out.Node.CPU, n.CPU)
		out.Node.Memory = addMemory(out.Node.Memory, n.Memory)
		for _, ps := range sum.Pods {
			p, ok := parents[ps.PodRef.Namespace+"/"+ps.PodRef.Name]
			if !ok {
				continue
			}
			ps.PodRef = statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}
			out.Pods = append(out.Pods, ps)
		}
	}
	return out
}

func addCPU(a, b *statsv1alpha1.CPUStats) *statsv1alpha1.CPUStats {
	if b == nil {
		return a
	}
	if a == nil {
		a = &statsv1alpha1.CPUStats{Time: b.Time}
	}
	a.UsageNanoCores = addUint(a.UsageNanoCores, b.UsageNanoCores)
	a.UsageCoreNanoSeconds = addUint(a.UsageCoreNanoSeconds, b.UsageCoreNanoSeconds)
	a.Time = later(a.Time, b.Time)
	return a
}

func addMemory(a, b *statsv1alpha1.MemoryStats) *statsv1alpha1.MemoryStats {
	if b == nil {
		return a
	}
	if a == nil {
		a = &statsv1alpha1.MemoryStats{Time: b.Time}
	}
	a.AvailableBytes = addUint(a.AvailableBytes, b.AvailableBytes)
	a.UsageBytes = addUint(a.UsageBytes, b.UsageBytes)
	a.WorkingSetBytes = addUint(a.WorkingSetBytes, b.WorkingSetBytes)
	a.RSSBytes = addUint(a.RSSBytes, b.RSSBytes)
	a.Time = later(a.Time, b.Time)
	return a
}

func addUint(a, b *uint64) *uint64 {
	if b == nil {
		return a
	}
	v := *b
	if a != nil {
		v += *a
	}
	return &v
}

func later(a, b metav1.Time) metav1.Time {
	if b.After(a.Time) {
		return b
	}
	return a
}
