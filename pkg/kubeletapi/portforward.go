package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// PortForward carries one connection to port of the delegate, through
// this cluster's API server: a port-forward session with one error and
// one data stream, as kubectl opens for each local connection.
func (s *Server) PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error {
	defer func() { _ = stream.Close() }()
	d, err := s.cfg.Delegates.Delegate(namespace, pod)
	if err != nil {
		return err
	}
	u := s.cfg.Child.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(d.Namespace).Name(d.Name).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(s.cfg.ChildConfig)
	if err != nil {
		return err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s in this cluster: %w", d.Namespace, d.Name, childError(err))
	}
	defer func() { _ = conn.Close() }()

	headers := http.Header{}
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("creating the error stream: %w", err)
	}
	_ = errorStream.Close() // nothing is sent on it
	remoteErr := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errorStream)
		switch {
		case err != nil:
			remoteErr <- fmt.Errorf("reading the error stream: %w", err)
		case len(msg) > 0:
			remoteErr <- errors.New(string(msg))
		default:
			remoteErr <- nil
		}
	}()

	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	dataStream, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("creating the data stream: %w", err)
	}
	up := make(chan struct{})
	go func() {
		defer close(up)
		_, _ = io.Copy(dataStream, stream)
		_ = dataStream.Close() // half-close: no more data from the caller
	}()
	down := make(chan struct{})
	go func() {
		defer close(down)
		_, _ = io.Copy(stream, dataStream)
	}()
	select {
	case <-down:
	case <-ctx.Done():
		return ctx.Err()
	case err := <-remoteErr:
		if err != nil {
			return err
		}
		<-down
		return nil
	}
	// The error stream ends when the child is done with the connection,
	// with its message if any: wait for it, as kubectl does, or the
	// message of a failed forward is lost when the data stream ends first.
	select {
	case err := <-remoteErr:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
