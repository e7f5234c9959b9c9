package kubeletapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	nestletapi "github.com/nestlet/nestlet/api"
)

type fakeReserver struct {
	mu  sync.Mutex
	got []*corev1.Pod
}

func (f *fakeReserver) Reserve(_ context.Context, pod *corev1.Pod, _ time.Duration) (nestletapi.Reservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, pod)
	return nestletapi.Reservation{Held: true, Node: "leaf-a"}, nil
}

func (f *fakeReserver) Withdraw(string, string, types.UID) {}

// A reservation's pod is read as JSON, or as protobuf when the request
// says so (a scheduler sends protobuf to an agent that lists it in
// api.AnnotationReserveEncodings); a body that is neither is refused with
// why.
func TestReserveReadsJSONAndProtobuf(t *testing.T) {
	reserver := &fakeReserver{}
	s, err := New(Config{NodeName: "vnode", Delegates: &fakeDelegates{}, Child: fake.NewClientset(),
		ChildConfig: &rest.Config{Host: "https://child.example"}, Reserver: reserver})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	want := pod("ns", "web-1", "u1")
	want.Labels = map[string]string{"app": "web"}
	want.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx"}}
	asJSON, err := json.Marshal(want)
	require.NoError(t, err)
	asProtobuf, err := runtime.Encode(scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion), want)
	require.NoError(t, err)
	post := func(contentType string, body []byte) (int, string) {
		resp, err := http.Post(srv.URL+nestletapi.ReservePathFor("vnode", "ns", "web-1"), contentType, bytes.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		contentType string
		body        []byte
	}{
		{"application/json", asJSON},
		{"", asJSON},
		{runtime.ContentTypeProtobuf, asProtobuf},
	} {
		code, body := post(tc.contentType, tc.body)
		require.Equal(t, http.StatusOK, code, body)
		require.JSONEq(t, `{"held":true,"node":"leaf-a"}`, body)
	}
	require.Len(t, reserver.got, 3)
	for _, got := range reserver.got {
		got.TypeMeta = want.TypeMeta
		require.Equal(t, want, got)
	}

	code, body := post(runtime.ContentTypeProtobuf, asJSON)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "reading the pod to reserve for")
	code, _ = post("application/json", asProtobuf)
	require.Equal(t, http.StatusBadRequest, code)
	require.Len(t, reserver.got, 3)
}
