package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// waitRootLive waits until the root's control plane acts again after its
// API server came back: a probe pod made at the root is bound (the
// scheduler watches again) and a probe Service gets its EndpointSlice (the
// endpoint slice controller does). Its controller manager's and
// scheduler's informers back off for up to a minute after an outage, and
// a test that follows must not spend its own timeouts on that. Everything
// it makes is in a namespace of its own, deleted at the end.
func waitRootLive(ctx context.Context, t *testing.T) {
	t.Helper()
	root := env.Cluster("root").Client
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("live-probe-%d", time.Now().UnixNano())
	defer func() {
		_ = root.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	labels := map[string]string{"app": "live-probe"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"topology.kubernetes.io/region": "east"},
			Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}}}
	// Each object is created once, retried until the root takes it: the
	// namespace, then (once its default service account exists, which
	// admission needs) the probe pod and Service.
	creates := []struct {
		what   string
		create func(context.Context) error
	}{
		{"namespace", func(ctx context.Context) error {
			_, err := root.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		}},
		{"probe pod", func(ctx context.Context) error {
			_, err := root.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			return err
		}},
		{"probe Service", func(ctx context.Context) error {
			_, err := root.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			return err
		}},
	}
	var why string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for len(creates) > 0 {
			if err := creates[0].create(ctx); err != nil && !apierrors.IsAlreadyExists(err) {
				why = creates[0].what + ": " + err.Error()
				return false, nil
			}
			creates = creates[1:]
		}
		p, err := root.CoreV1().Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName == "" {
			why = "the probe pod is not bound yet"
			return false, nil
		}
		slices, err := root.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=probe"})
		if err != nil || len(slices.Items) == 0 {
			why = "the probe Service has no EndpointSlice yet"
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the root's control plane does not act again after its outage: %s: %v", why, err)
	}
}
