package kubeclient

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewRecorder records the agent's events through client until ctx ends,
// as component "nestlet" on host.
func NewRecorder(ctx context.Context, client kubernetes.Interface, host string) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "nestlet", Host: host})
}
