// Package kubeletapi serves the kubelet API of a virtual node: each request
// for a pod bound to the virtual node (logs, exec, attach, port-forward) is
// answered by calling the same subresource of the pod's delegate on this
// cluster's API server, streaming end to end. When the delegate sits on a
// deeper virtual node, this cluster's API server calls the next agent, and
// so on down to a real kubelet.
//
// One file per endpoint, as virtual-kubelet's node/api: logs.go, exec.go,
// attach.go, portforward.go, stats.go, metrics.go; auth.go authenticates and
// authorises callers against the parent as a kubelet does.
package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"

	nestletapi "github.com/nestlet/nestlet/api"
)

// Delegates resolves a pod bound to the virtual node (in the parent) to its
// delegate in this cluster.
type Delegates interface {
	// Delegate returns the delegate of the parent pod namespace/name, or an
	// error that errdefs.IsNotFound recognises. The pod must not be
	// mutated.
	Delegate(namespace, name string) (*corev1.Pod, error)
	// GetPods lists the parent pods that have a delegate here.
	GetPods(ctx context.Context) ([]*corev1.Pod, error)
}

// Config of a Server. Fields without a stated default are required.
type Config struct {
	// NodeName is the virtual node's name in the parent.
	NodeName string
	// Delegates finds the delegate of a parent pod.
	Delegates Delegates
	// Child is a client of this cluster, and ChildConfig its REST config
	// (streaming subresources build their own transports from it).
	Child       kubernetes.Interface
	ChildConfig *rest.Config
	// Nodes lists this cluster's nodes, for the stats summary (optional:
	// without it /stats/summary and /metrics/resource answer 404).
	Nodes func() ([]*corev1.Node, error)
	// Reserver places pods by reservation (optional: without it
	// /reserve answers 501 and parents bind first, place after).
	Reserver Reserver
	// StreamIdleTimeout and StreamCreationTimeout bound streaming sessions
	// (defaults 4h and 30s, as a kubelet's).
	StreamIdleTimeout     time.Duration
	StreamCreationTimeout time.Duration
}

// ErrMissingField is returned by New for a required field left empty.
var ErrMissingField = errors.New("missing required field")

// Server answers the kubelet API of one virtual node.
type Server struct {
	cfg Config
}

// New validates cfg and fills its defaults.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.NodeName == "":
		return nil, fmt.Errorf("kubelet server: %w NodeName", ErrMissingField)
	case cfg.Delegates == nil:
		return nil, fmt.Errorf("kubelet server: %w Delegates", ErrMissingField)
	case cfg.Child == nil || cfg.ChildConfig == nil:
		return nil, fmt.Errorf("kubelet server: %w Child/ChildConfig", ErrMissingField)
	}
	if cfg.StreamIdleTimeout == 0 {
		cfg.StreamIdleTimeout = 4 * time.Hour
	}
	if cfg.StreamCreationTimeout == 0 {
		cfg.StreamCreationTimeout = 30 * time.Second
	}
	return &Server{cfg: cfg}, nil
}

// Handler returns the kubelet API routes, without authentication (wrap it
// with WithAuth, or serve it only through an authenticated tunnel).
func (s *Server) Handler() http.Handler {
	cfg := api.PodHandlerConfig{
		RunInContainer:        s.Exec,
		AttachToContainer:     s.Attach,
		PortForward:           s.PortForward,
		GetPods:               s.cfg.Delegates.GetPods,
		GetPodsFromKubernetes: s.cfg.Delegates.GetPods,
		StreamIdleTimeout:     s.cfg.StreamIdleTimeout,
		StreamCreationTimeout: s.cfg.StreamCreationTimeout,
	}
	if s.cfg.Nodes != nil {
		cfg.GetStatsSummary = s.StatsSummary
		cfg.GetMetricsResource = s.MetricsResource
	}
	mux := http.NewServeMux()
	api.AttachPodRoutes(cfg, mux, false)
	// Logs are served here rather than by virtual-kubelet, whose option
	// parsing loses an explicit tailLines=0.
	mux.HandleFunc(logsPrefix, s.serveLogs)
	mux.HandleFunc("/"+nestletapi.ReservePath+"/", s.serveReserve)
	return mux
}
