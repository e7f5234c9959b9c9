package kubeletapi

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// Attach attaches the caller's streams to the delegate's container through
// this cluster's API server.
func (s *Server) Attach(ctx context.Context, namespace, pod, container string, attach api.AttachIO) error {
	return s.session(ctx, namespace, pod, "attach", func() runtime.Object {
		return &corev1.PodAttachOptions{
			Container: container,
			Stdin:     attach.Stdin() != nil,
			Stdout:    attach.Stdout() != nil,
			Stderr:    attach.Stderr() != nil,
			TTY:       attach.TTY(),
		}
	}, attach)
}
