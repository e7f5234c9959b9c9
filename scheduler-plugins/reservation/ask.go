package reservation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
)

// reserveBelow asks the agent of virtual node node for a place for pod,
// through this API server's nodes/proxy. A child whose agent does not
// reserve (an older agent: 404 or 501) gets the pod bound, as before.
func (pl *Reservation) reserveBelow(ctx context.Context, pod *corev1.Pod, node *corev1.Node) (api.Reservation, error) {
	contentType, body, err := reservationBody(pod, node)
	if err != nil {
		return api.Reservation{}, err
	}
	var code int
	raw, err := pl.handle.ClientSet().CoreV1().RESTClient().Post().
		AbsPath("/api/v1/nodes", node.Name, "proxy", api.ReservePath, node.Name, pod.Namespace, pod.Name).
		Param("wait", reserveWait.String()).
		SetHeader("Content-Type", contentType).
		Body(bytes.NewReader(body)).
		Do(ctx).StatusCode(&code).Raw()
	if err != nil {
		return answerOf(code, raw, err)
	}
	var res api.Reservation
	if err := json.Unmarshal(raw, &res); err != nil {
		return api.Reservation{}, fmt.Errorf("reading the child's answer %q: %w", raw, err)
	}
	return res, nil
}

// podProtobuf encodes a pod in the Kubernetes protobuf encoding, with its
// kind and version.
var podProtobuf = scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)

// reservationBody is the pod a reservation request carries: without its
// managed fields or node, as protobuf to an agent that reads it
// (api.AnnotationReserveEncodings: a third of a middle agent's work on a
// reservation was decoding JSON), else as JSON.
func reservationBody(pod *corev1.Pod, node *corev1.Node) (contentType string, body []byte, err error) {
	out := pod.DeepCopy()
	out.ManagedFields = nil
	out.Spec.NodeName = "" // the scheduler's assumed copy names the node
	if slices.Contains(strings.Split(node.Annotations[api.AnnotationReserveEncodings], ","), api.EncodingProtobuf) {
		body, err = runtime.Encode(podProtobuf, out)
		return runtime.ContentTypeProtobuf, body, err
	}
	body, err = json.Marshal(out)
	return runtime.ContentTypeJSON, body, err
}

func (pl *Reservation) withdrawBelow(ctx context.Context, pod *corev1.Pod, node string) {
	err := pl.handle.ClientSet().CoreV1().RESTClient().Delete().
		AbsPath("/api/v1/nodes", node, "proxy", api.ReservePath, node, pod.Namespace, pod.Name).
		Param("uid", string(pod.UID)).
		Do(ctx).Error()
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Withdrawing a reservation failed; the child collects it", "pod", klog.KObj(pod), "node", node, "err", err)
	}
}

// answerOf is the reservation to go on with when asking failed: none (bind
// as before) from an agent that does not reserve (404 or 501), else the
// child's answer as the error, from what client-go kept of it: the body,
// or, where it made a status of the answer (a 503), the status's cause.
func answerOf(code int, raw []byte, err error) (api.Reservation, error) {
	msg := string(bytes.TrimSpace(raw))
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		if code == 0 {
			code = int(s.Code)
		}
		if msg == "" && s.Details != nil {
			for _, c := range s.Details.Causes {
				if c.Message != "" {
					msg = c.Message
					break
				}
			}
		}
	}
	switch {
	case code == http.StatusNotFound || code == http.StatusNotImplemented:
		return api.Reservation{}, nil
	case msg != "":
		return api.Reservation{}, fmt.Errorf("asking for a place (HTTP %d): %s", code, msg)
	default:
		return api.Reservation{}, fmt.Errorf("asking for a place (HTTP %d): %w", code, err)
	}
}
