package hollow

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// startCluster runs a simulated cluster with two nodes, zone a and zone b,
// each with room for podsPerNode pods.
func startCluster(t *testing.T, podsPerNode string) *Cluster {
	t.Helper()
	c, err := NewCluster(ClusterConfig{
		Name:  "sim",
		Nodes: 2,
		NodeCapacity: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse(podsPerNode),
		},
		Labels: map[string]string{"topology.kubernetes.io/region": "r1"},
	})
	require.NoError(t, err)
	// Zones per node, as the nodes' only difference.
	for i, zone := range []string{"a", "b"} {
		n, err := c.Client.CoreV1().Nodes().Get(t.Context(), c.NodeNames[i], metav1.GetOptions{})
		require.NoError(t, err)
		n.Labels["topology.kubernetes.io/zone"] = zone
		_, err = c.Client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{})
		require.NoError(t, err)
		c.kubelet.nodes[i] = n
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

func pod(name string, selector map[string]string, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeSelector: selector,
			Containers: []corev1.Container{{Name: "app", Image: "pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
		},
	}
}

// waitPod waits until ok holds for the pod.
func waitPod(t *testing.T, c *Cluster, name string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = nil
			return ok(nil), nil
		}
		last = p
		return ok(p), nil
	})
	require.NoError(t, err, "pod %s: last seen %+v", name, last)
	return last
}

func running(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning }

func TestKubeletRunsPods(t *testing.T) {
	tests := []struct {
		name     string
		selector map[string]string
		wantNode string // "" for any node
	}{
		{name: "anywhere"},
		{name: "zone-b", selector: map[string]string{"topology.kubernetes.io/zone": "b"}, wantNode: "sim-node-1"},
		{name: "zone-a", selector: map[string]string{"topology.kubernetes.io/zone": "a"}, wantNode: "sim-node-0"},
	}
	c := startCluster(t, "110")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(t.Context(), pod(tt.name, tt.selector, "100m"), metav1.CreateOptions{})
			require.NoError(t, err)
			p := waitPod(t, c, tt.name, running)
			require.NotEmpty(t, p.Spec.NodeName)
			if tt.wantNode != "" {
				require.Equal(t, tt.wantNode, p.Spec.NodeName)
			}
			require.NotEmpty(t, p.Status.PodIP)
			require.NotNil(t, p.Status.StartTime)
			require.Len(t, p.Status.ContainerStatuses, 1)
			require.NotNil(t, p.Status.ContainerStatuses[0].State.Running)
			ready := podCondition(p, corev1.PodReady)
			require.NotNil(t, ready)
			require.Equal(t, corev1.ConditionTrue, ready.Status)
			scheduled := podCondition(p, corev1.PodScheduled)
			require.NotNil(t, scheduled)
			require.Equal(t, corev1.ConditionTrue, scheduled.Status)
		})
	}
}

func TestKubeletRoundRobin(t *testing.T) {
	c := startCluster(t, "110")
	nodes := map[string]int{}
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		_, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(t.Context(), pod(name, nil, "10m"), metav1.CreateOptions{})
		require.NoError(t, err)
		nodes[waitPod(t, c, name, running).Spec.NodeName]++
	}
	require.Equal(t, map[string]int{"sim-node-0": 2, "sim-node-1": 2}, nodes)
}

func TestKubeletUnschedulable(t *testing.T) {
	c := startCluster(t, "1")
	pods := c.Client.CoreV1().Pods(metav1.NamespaceDefault)
	ctx := t.Context()

	// Nothing matches the selector.
	_, err := pods.Create(ctx, pod("nowhere", map[string]string{"topology.kubernetes.io/zone": "c"}, "10m"), metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitPod(t, c, "nowhere", func(p *corev1.Pod) bool {
		c := podCondition(p, corev1.PodScheduled)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
	})
	require.Empty(t, p.Spec.NodeName)
	require.Contains(t, podCondition(p, corev1.PodScheduled).Message, "0/2 nodes are available")

	// Too much CPU for any node.
	_, err = pods.Create(ctx, pod("huge", nil, "3"), metav1.CreateOptions{})
	require.NoError(t, err)
	p = waitPod(t, c, "huge", func(p *corev1.Pod) bool {
		c := podCondition(p, corev1.PodScheduled)
		return c != nil && c.Reason == corev1.PodReasonUnschedulable
	})
	require.Contains(t, podCondition(p, corev1.PodScheduled).Message, "insufficient cpu")

	// One pod per node: the third waits until one goes.
	for _, name := range []string{"one", "two"} {
		_, err := pods.Create(ctx, pod(name, nil, "10m"), metav1.CreateOptions{})
		require.NoError(t, err)
		waitPod(t, c, name, running)
	}
	_, err = pods.Create(ctx, pod("three", nil, "10m"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPod(t, c, "three", func(p *corev1.Pod) bool {
		c := podCondition(p, corev1.PodScheduled)
		return c != nil && c.Reason == corev1.PodReasonUnschedulable
	})
	require.NoError(t, pods.Delete(ctx, "one", metav1.DeleteOptions{}))
	waitPod(t, c, "three", running)
}

func TestKubeletDeletesGracefully(t *testing.T) {
	c := startCluster(t, "110")
	pods := c.Client.CoreV1().Pods(metav1.NamespaceDefault)
	ctx := t.Context()
	created, err := pods.Create(ctx, pod("web", nil, "10m"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPod(t, c, "web", running)

	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web", ResourceVersion: created.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, pods.Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}))
	sawDeletionTimestamp := false
	for {
		ev := nextEvent(t, w)
		p := ev.Object.(*corev1.Pod)
		if p.DeletionTimestamp != nil {
			sawDeletionTimestamp = true
		}
		if ev.Type == "DELETED" {
			require.Equal(t, corev1.PodSucceeded, p.Status.Phase)
			break
		}
	}
	require.True(t, sawDeletionTimestamp, "the pod was not marked for deletion first")
	_, err = pods.Get(ctx, "web", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err))
}
