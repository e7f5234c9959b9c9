package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
)

// SchedulingWebhook is a mutating admission webhook for pods, where the
// cluster's default scheduler is the stock one and cannot be replaced: it
// routes the pods of the namespaces it is registered for (the chart's
// MutatingWebhookConfiguration selects them by label) to Nestlet's
// scheduler, and gives them the toleration of the virtual nodes' provider
// taint, so that users apply plain Deployments unchanged. A pod that names
// another scheduler is left alone, and so is a DaemonSet's (a virtual
// node runs no DaemonSet).
type SchedulingWebhook struct {
	// SchedulerName is Nestlet's scheduler's (default "nestlet-scheduler").
	SchedulerName string
}

// maxReviewBytes bounds an AdmissionReview read (the API server sends at
// most its request size limit, 3 MiB, plus the review's fields).
const maxReviewBytes = 4 << 20

// ServeHTTP answers an AdmissionReview (admission.k8s.io/v1) for a pod.
func (w *SchedulingWebhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(rw, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(rw, fmt.Sprintf("not an AdmissionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	patch, err := w.patch(review.Request)
	switch {
	case err != nil:
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: err.Error()}
	case patch != nil:
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
		klog.FromContext(r.Context()).V(4).Info("Routed a pod to Nestlet's scheduler", "namespace", review.Request.Namespace, "pod", review.Request.Name)
	}
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(out)
}

// patch returns the JSON patch for the pod of req, or nil when it is left
// as it is.
func (w *SchedulingWebhook) patch(req *admissionv1.AdmissionRequest) ([]byte, error) {
	if req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create || req.SubResource != "" {
		return nil, nil
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return nil, fmt.Errorf("decoding the pod: %w", err)
	}
	if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
		return nil, nil // another scheduler, on purpose
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return nil, nil
		}
	}
	name := w.SchedulerName
	if name == "" {
		name = "nestlet-scheduler"
	}
	ops := []map[string]any{{"op": "add", "path": "/spec/schedulerName", "value": name}}
	toleration := corev1.Toleration{Key: api.TaintKeyProvider, Operator: corev1.TolerationOpEqual, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}
	taint := api.ProviderTaint()
	tolerated := false
	for _, t := range pod.Spec.Tolerations {
		tolerated = tolerated || t.ToleratesTaint(klog.Background(), &taint, false)
	}
	switch {
	case tolerated:
	case len(pod.Spec.Tolerations) == 0:
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/tolerations", "value": []corev1.Toleration{toleration}})
	default:
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/tolerations/-", "value": toleration})
	}
	return json.Marshal(ops)
}

// ServeWebhook serves w at /mutate-pods over TLS with cert on address,
// until ctx ends.
func ServeWebhook(ctx context.Context, address string, cert tls.Certificate, w *SchedulingWebhook) error {
	l, err := tls.Listen("tcp", address, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return fmt.Errorf("the webhook's port: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mutate-pods", w)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		_ = s.Close()
	}()
	klog.FromContext(ctx).Info("Serving the scheduling webhook", "address", l.Addr().String(), "schedulerName", w.SchedulerName)
	if err := s.Serve(l); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
