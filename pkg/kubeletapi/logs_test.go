package kubeletapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
)

func TestLogOptions(t *testing.T) {
	since := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	tests := []struct {
		name    string
		query   string
		want    *corev1.PodLogOptions
		wantErr string // a substring of the error; "" for none
	}{
		{name: "no parameters", query: "", want: &corev1.PodLogOptions{Container: "app"}},
		{
			name:  "booleans",
			query: "follow=true&previous=1&timestamps=TRUE",
			want:  &corev1.PodLogOptions{Container: "app", Follow: true, Previous: true, Timestamps: true},
		},
		{
			name:  "explicit false booleans",
			query: "follow=false&previous=0&timestamps=false",
			want:  &corev1.PodLogOptions{Container: "app"},
		},
		{
			name:  "tailLines=0 is kept as an explicit 0",
			query: "tailLines=0",
			want:  &corev1.PodLogOptions{Container: "app", TailLines: ptr.To[int64](0)},
		},
		{
			name:  "numbers",
			query: "tailLines=10&limitBytes=2048&sinceSeconds=60",
			want: &corev1.PodLogOptions{
				Container: "app", TailLines: ptr.To[int64](10), LimitBytes: ptr.To[int64](2048), SinceSeconds: ptr.To[int64](60),
			},
		},
		{
			name:  "sinceTime in UTC",
			query: "sinceTime=2024-05-01T10:00:00Z",
			want:  &corev1.PodLogOptions{Container: "app", SinceTime: &since},
		},
		{
			name:  "sinceTime with an offset is the same instant",
			query: "sinceTime=2024-05-01T12:00:00%2B02:00",
			want:  &corev1.PodLogOptions{Container: "app", SinceTime: &since},
		},
		{
			name:  "stream",
			query: "stream=Stderr",
			want:  &corev1.PodLogOptions{Container: "app", Stream: ptr.To(corev1.LogStreamStderr)},
		},
		{
			name:  "every parameter, unknown ones ignored",
			query: "follow=true&previous=true&timestamps=true&tailLines=5&limitBytes=100&sinceSeconds=30&sinceTime=2024-05-01T10:00:00Z&stream=All&container=other&pretty=true",
			want: &corev1.PodLogOptions{
				Container: "app", Follow: true, Previous: true, Timestamps: true,
				TailLines: ptr.To[int64](5), LimitBytes: ptr.To[int64](100), SinceSeconds: ptr.To[int64](30),
				SinceTime: &since, Stream: ptr.To(corev1.LogStreamAll),
			},
		},
		{name: "bad follow", query: "follow=yes", wantErr: "follow"},
		{name: "bad previous", query: "previous=maybe", wantErr: "previous"},
		{name: "bad timestamps", query: "timestamps=2", wantErr: "timestamps"},
		{name: "bad tailLines", query: "tailLines=ten", wantErr: "tailLines"},
		{name: "fractional limitBytes", query: "limitBytes=1.5", wantErr: "limitBytes"},
		{name: "bad sinceSeconds", query: "sinceSeconds=1m", wantErr: "sinceSeconds"},
		{name: "sinceTime not RFC3339", query: "sinceTime=2024-05-01", wantErr: "sinceTime"},
		{name: "sinceTime as seconds", query: "sinceTime=1714557600", wantErr: "sinceTime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/pod/app?"+tt.query, nil)
			got, err := logOptions(r, "app")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("logOptions() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServeLogs(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		target    string
		delegates *fakeDelegates // nil: parent-ns/web -> child-ns/parent-ns-web
		wantCode  int
		wantBody  string // a substring of the body
		// wantOpts, when set, are the options the child's API server was
		// asked for, in the delegate's namespace.
		wantOpts *corev1.PodLogOptions
	}{
		{
			name:     "a known delegate's logs",
			target:   "/containerLogs/parent-ns/web/app",
			wantCode: http.StatusOK,
			wantBody: "fake logs",
			wantOpts: &corev1.PodLogOptions{Container: "app"},
		},
		{
			name:     "query parameters passed on, tailLines=0 included",
			target:   "/containerLogs/parent-ns/web/sidecar?tailLines=0&follow=true&timestamps=true",
			wantCode: http.StatusOK,
			wantBody: "fake logs",
			wantOpts: &corev1.PodLogOptions{Container: "sidecar", TailLines: ptr.To[int64](0), Follow: true, Timestamps: true},
		},
		{
			name:     "a pod without a delegate",
			target:   "/containerLogs/parent-ns/unknown/app",
			wantCode: http.StatusNotFound,
			wantBody: "has no delegate",
		},
		{
			name:      "delegate lookup fails otherwise",
			target:    "/containerLogs/parent-ns/web/app",
			delegates: &fakeDelegates{err: errBoom},
			wantCode:  http.StatusInternalServerError,
			wantBody:  "boom",
		},
		{
			name:      "delegate lookup says invalid input",
			target:    "/containerLogs/parent-ns/web/app",
			delegates: &fakeDelegates{err: errdefs.InvalidInput("bad pod")},
			wantCode:  http.StatusBadRequest,
			wantBody:  "bad pod",
		},
		{
			name:     "no container",
			target:   "/containerLogs/parent-ns/web",
			wantCode: http.StatusNotFound,
			wantBody: "expected /containerLogs/{namespace}/{pod}/{container}",
		},
		{
			name:     "one segment too many",
			target:   "/containerLogs/parent-ns/web/app/extra",
			wantCode: http.StatusNotFound,
			wantBody: "expected /containerLogs/{namespace}/{pod}/{container}",
		},
		{
			name:     "empty container",
			target:   "/containerLogs/parent-ns/web/",
			wantCode: http.StatusNotFound,
			wantBody: "expected /containerLogs/{namespace}/{pod}/{container}",
		},
		{
			name:     "bad query parameter",
			target:   "/containerLogs/parent-ns/web/app?tailLines=all",
			wantCode: http.StatusBadRequest,
			wantBody: "tailLines",
		},
		{
			name:     "not a GET",
			method:   http.MethodPost,
			target:   "/containerLogs/parent-ns/web/app",
			wantCode: http.StatusMethodNotAllowed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, client := newTestServer(t, tt.delegates)
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req := httptest.NewRequestWithContext(t.Context(), method, tt.target, nil)
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)

			assert.Equal(t, tt.wantCode, rec.Code, "body: %s", rec.Body.String())
			assert.Contains(t, rec.Body.String(), tt.wantBody)

			var logCalls []k8stesting.GenericAction
			for _, a := range client.Actions() {
				if a.GetSubresource() == "log" {
					logCalls = append(logCalls, a.(k8stesting.GenericAction))
				}
			}
			if tt.wantOpts == nil {
				assert.Empty(t, logCalls, "the child's API server must not be asked")
				return
			}
			require.Len(t, logCalls, 1)
			assert.Equal(t, "child-ns", logCalls[0].GetNamespace(), "logs read in the delegate's namespace")
			assert.Equal(t, "text/plain", rec.Header().Get("Content-Type"))
			if diff := cmp.Diff(tt.wantOpts, logCalls[0].GetValue()); diff != "" {
				t.Errorf("options sent to the child (-want +got):\n%s", diff)
			}
		})
	}
}
