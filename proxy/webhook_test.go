package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/nestlet/nestlet/api"
)

// review sends pod to the webhook as the API server does and returns the
// response and the pod with the response's patch applied.
func review(t *testing.T, w *SchedulingWebhook, pod *corev1.Pod) (*admissionv1.AdmissionResponse, *corev1.Pod) {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	in, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Operation: admissionv1.Create, Namespace: "apps", Object: runtime.RawExtension{Raw: raw}},
	})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader(in)))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.Equal(t, "AdmissionReview", out.Kind)
	require.Equal(t, "u1", string(out.Response.UID))
	if out.Response.Patch == nil {
		return out.Response, pod
	}
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *out.Response.PatchType)
	patch, err := jsonpatch.DecodePatch(out.Response.Patch)
	require.NoError(t, err)
	patched, err := patch.Apply(raw)
	require.NoError(t, err)
	var p corev1.Pod
	require.NoError(t, json.Unmarshal(patched, &p))
	return out.Response, &p
}

func TestSchedulingWebhook(t *testing.T) {
	w := &SchedulingWebhook{SchedulerName: "nestlet-scheduler"}
	provider := corev1.Toleration{Key: api.TaintKeyProvider, Operator: corev1.TolerationOpEqual, Value: api.TaintValueProvider, Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Toleration{Key: "example.com/gpu", Operator: corev1.TolerationOpExists}

	t.Run("a plain pod goes to Nestlet's scheduler, tolerating the virtual nodes", func(t *testing.T) {
		resp, p := review(t, w, &corev1.Pod{Spec: corev1.PodSpec{SchedulerName: corev1.DefaultSchedulerName}})
		require.True(t, resp.Allowed)
		require.Equal(t, "nestlet-scheduler", p.Spec.SchedulerName)
		require.Equal(t, []corev1.Toleration{provider}, p.Spec.Tolerations)
	})
	t.Run("its own tolerations are kept", func(t *testing.T) {
		_, p := review(t, w, &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{other}}})
		require.Equal(t, "nestlet-scheduler", p.Spec.SchedulerName)
		require.Equal(t, []corev1.Toleration{other, provider}, p.Spec.Tolerations)
	})
	t.Run("a pod that tolerates the taint already gets no second toleration", func(t *testing.T) {
		_, p := review(t, w, &corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: api.TaintKeyProvider, Operator: corev1.TolerationOpExists}}}})
		require.Equal(t, "nestlet-scheduler", p.Spec.SchedulerName)
		require.Len(t, p.Spec.Tolerations, 1)
	})
	t.Run("another scheduler is left alone", func(t *testing.T) {
		resp, p := review(t, w, &corev1.Pod{Spec: corev1.PodSpec{SchedulerName: "my-scheduler"}})
		require.True(t, resp.Allowed)
		require.Nil(t, resp.Patch)
		require.Equal(t, "my-scheduler", p.Spec.SchedulerName)
	})
	t.Run("a DaemonSet's pod is left alone", func(t *testing.T) {
		resp, _ := review(t, w, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "x", Controller: ptr.To(true)}}}})
		require.True(t, resp.Allowed)
		require.Nil(t, resp.Patch)
	})
	t.Run("not an AdmissionReview", func(t *testing.T) {
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader([]byte(`{"kind":"Pod"}`))))
		require.Equal(t, http.StatusBadRequest, rec.Code)
	})
}
