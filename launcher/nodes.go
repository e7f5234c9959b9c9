package launcher

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// NodeOptions describe a kwok node.
type NodeOptions struct {
	Name   string
	Labels map[string]string
	// Capacity defaults to 8 CPU, 32Gi memory, 110 pods; allocatable is
	// set equal to it.
	Capacity corev1.ResourceList
	Taints   []corev1.Taint
	// Annotations are added to kwok's own.
	Annotations map[string]string
	// PodCIDR is the node's pod CIDR; by default the next free /24 of
	// 10.128.0.0/9, so that no two nodes the launcher makes share one.
	PodCIDR string
}

// DefaultNodeCapacity is the capacity of a node whose options give none.
func DefaultNodeCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
}

// AddNode creates a kwok-managed node and waits until kwok reports it Ready.
func (c *Cluster) AddNode(ctx context.Context, o NodeOptions) (*corev1.Node, error) {
	if err := c.CreateNode(ctx, o); err != nil {
		return nil, err
	}
	var ready *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		if NodeReady(n) {
			ready = n
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for node %s to become Ready: %w", o.Name, err)
	}
	return ready, nil
}

// CreateNode creates a kwok-managed node without waiting for it: callers
// that add many wait for them all at once.
func (c *Cluster) CreateNode(ctx context.Context, o NodeOptions) error {
	if _, err := c.ensureKwok(); err != nil {
		return fmt.Errorf("starting kwok for node %s: %w", o.Name, err)
	}
	capacity := o.Capacity
	if capacity == nil {
		capacity = DefaultNodeCapacity()
	}
	labels := map[string]string{
		"type":                   "kwok",
		"kubernetes.io/hostname": o.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
	}
	maps.Copy(labels, o.Labels)
	annotations := map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
	maps.Copy(annotations, o.Annotations)
	annotations[KwokNodeAnnotation] = "fake"
	podCIDR := o.PodCIDR
	var err error
	if podCIDR == "" {
		if podCIDR, err = nextPodCIDR(); err != nil {
			return err
		}
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        o.Name,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{Taints: o.Taints, PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
		Status: corev1.NodeStatus{
			Capacity:    capacity.DeepCopy(),
			Allocatable: capacity.DeepCopy(),
		},
	}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: "nestlet-test"}); err != nil {
		return fmt.Errorf("creating node %s: %w", o.Name, err)
	}
	return nil
}

// NodeReady reports whether node has condition Ready=True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
