package kubeletapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
)

// Reserver places pods by reservation (provider/forward/reserve.go).
type Reserver interface {
	// Reserve holds a place in this cluster for a parent pod not bound
	// yet, waiting up to maxWait for this cluster's scheduler.
	Reserve(ctx context.Context, pod *corev1.Pod, maxWait time.Duration) (api.Reservation, error)
	// Withdraw deletes the reservation of the parent pod namespace/name.
	Withdraw(namespace, name string, uid types.UID)
}

// maxReserveBody bounds the pod a reservation request carries.
const maxReserveBody = 4 << 20

// serveReserve answers /reserve/<node>/<namespace>/<pod> (api.ReservePath):
// POST with the parent pod as JSON or protobuf (and an optional ?wait=
// duration) reserves, DELETE (?uid=) withdraws.
func (s *Server) serveReserve(w http.ResponseWriter, r *http.Request) {
	node, ns, name, ok := api.ParseReservePath(r.URL.Path)
	if !ok || node != s.cfg.NodeName {
		http.Error(w, fmt.Sprintf("virtual node %s reserves at %s", s.cfg.NodeName, api.ReservePathFor(s.cfg.NodeName, "<namespace>", "<pod>")), http.StatusNotFound)
		return
	}
	if s.cfg.Reserver == nil {
		http.Error(w, "this agent places no pods by reservation", http.StatusNotImplemented)
		return
	}
	switch r.Method {
	case http.MethodDelete:
		s.cfg.Reserver.Withdraw(ns, name, types.UID(r.URL.Query().Get("uid")))
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPost:
		pod, err := reservedPod(r)
		if err != nil {
			http.Error(w, fmt.Sprintf("reading the pod to reserve for: %v", err), http.StatusBadRequest)
			return
		}
		if pod.Namespace != ns || pod.Name != name {
			http.Error(w, fmt.Sprintf("the body is pod %s/%s, the path names %s/%s", pod.Namespace, pod.Name, ns, name), http.StatusBadRequest)
			return
		}
		var maxWait time.Duration
		if v := r.URL.Query().Get("wait"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				http.Error(w, fmt.Sprintf("wait=%q: want a positive duration", v), http.StatusBadRequest)
				return
			}
			maxWait = d
		}
		res, err := s.cfg.Reserver.Reserve(r.Context(), pod, maxWait)
		klog.FromContext(r.Context()).V(2).Info("Reservation asked", "pod", klog.KObj(pod), "held", res.Held, "node", res.Node, "unschedulable", res.Unschedulable, "err", err)
		if err != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(err, api.ErrBadReservation) {
				code = http.StatusBadRequest
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	default:
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "reservations are made with POST and withdrawn with DELETE", http.StatusMethodNotAllowed)
	}
}

// podProtobuf decodes a pod in the Kubernetes protobuf encoding.
var podProtobuf = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// reservedPod reads the pod of a reservation request: protobuf when its
// Content-Type says so (api.AnnotationReserveEncodings), else JSON.
func reservedPod(r *http.Request) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	body := io.LimitReader(r.Body, maxReserveBody)
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mediaType != runtime.ContentTypeProtobuf {
		return pod, json.NewDecoder(body).Decode(pod)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	obj, _, err := podProtobuf.Decode(data, nil, pod)
	if err != nil {
		return nil, err
	}
	out, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("the body is a %T, not a pod", obj)
	}
	return out, nil
}
