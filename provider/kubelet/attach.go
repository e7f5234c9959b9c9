package kubelet

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// Attach attaches the caller's streams to the delegate's container through
// this cluster's API server.
func (s *Server) Attach(ctx context.Context, namespace, pod, container string, attach api.AttachIO) error {
	d, err := s.cfg.Delegates.Delegate(namespace, pod)
	if err != nil {
		return err
	}
	u := s.cfg.Child.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(d.Namespace).Name(d.Name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{
			Container: container,
			Stdin:     attach.Stdin() != nil,
			Stdout:    attach.Stdout() != nil,
			Stderr:    attach.Stderr() != nil,
			TTY:       attach.TTY(),
		}, scheme.ParameterCodec).URL()
	return s.stream(ctx, u, attach)
}
