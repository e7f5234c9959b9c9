package kubeletapi

import (
	"context"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// Exec runs cmd in the delegate's container through this cluster's API
// server, wiring the caller's streams and terminal resizes to it. A
// non-zero exit code comes back as an exit error (reported to the caller
// as such); any other failure keeps the leaf's message.
func (s *Server) Exec(ctx context.Context, namespace, pod, container string, cmd []string, attach api.AttachIO) error {
	return s.session(ctx, namespace, pod, "exec", func() runtime.Object {
		return &corev1.PodExecOptions{
			Container: container,
			Command:   cmd,
			Stdin:     attach.Stdin() != nil,
			Stdout:    attach.Stdout() != nil,
			Stderr:    attach.Stderr() != nil,
			TTY:       attach.TTY(),
		}
	}, attach)
}

// session runs a remote command session on subresource (exec, attach) of
// the delegate of namespace/pod, with opts() as its query (built once the
// delegate is known).
func (s *Server) session(ctx context.Context, namespace, pod, subresource string, opts func() runtime.Object, attach api.AttachIO) error {
	d, err := s.cfg.Delegates.Delegate(namespace, pod)
	if err != nil {
		return err
	}
	u := s.cfg.Child.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(d.Namespace).Name(d.Name).SubResource(subresource).
		VersionedParams(opts(), scheme.ParameterCodec).URL()
	return s.stream(ctx, u, attach)
}

// stream runs a remote command session (exec or attach) at u, as kubectl
// does: WebSocket first, SPDY when the server cannot upgrade to it.
func (s *Server) stream(ctx context.Context, u *url.URL, attach api.AttachIO) error {
	spdyExec, err := remotecommand.NewSPDYExecutor(s.cfg.ChildConfig, "POST", u)
	if err != nil {
		return err
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(s.cfg.ChildConfig, "GET", u.String())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Tty: attach.TTY()}
	// Only streams the caller asked for: a nil interface, not a typed nil.
	if in := attach.Stdin(); in != nil {
		opts.Stdin = in
	}
	if out := attach.Stdout(); out != nil {
		opts.Stdout = out
	}
	if errOut := attach.Stderr(); errOut != nil {
		opts.Stderr = errOut
	}
	if attach.TTY() && attach.Resize() != nil {
		opts.TerminalSizeQueue = sizeQueue{ctx: ctx, ch: attach.Resize()}
	}
	err = exec.StreamWithContext(ctx, opts)
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ ExitStatus() int }); ok {
		return err
	}
	return unwrapExecError(childError(err))
}

// sizeQueue hands the caller's terminal resizes to the next level.
type sizeQueue struct {
	ctx context.Context
	ch  <-chan api.TermSize
}

// Next blocks until the next resize; nil ends the queue.
func (q sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s, ok := <-q.ch:
		if !ok {
			return nil
		}
		return &remotecommand.TerminalSize{Width: s.Width, Height: s.Height}
	case <-q.ctx.Done():
		return nil
	}
}
