package reservation

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/api"
)

// The child's answer reaches the pod's event whatever client-go makes of
// it (of a 503 it keeps neither the code nor the body, only a status whose
// cause is the body); an agent that does not reserve is bound to as before.
func TestAnswerKeepsTheChildsWords(t *testing.T) {
	const words = `creating the held delegate: serviceaccount "mount-test" not found`
	for _, tc := range []struct {
		code int
		want string // "" for no error
	}{
		{http.StatusServiceUnavailable, "asking for a place (HTTP 503): " + words},
		{http.StatusBadRequest, "asking for a place (HTTP 400): " + words},
		{http.StatusInternalServerError, words},
		{http.StatusNotFound, ""},
		{http.StatusNotImplemented, ""},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, words, tc.code)
		}))
		cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
		var code int
		raw, err := cs.CoreV1().RESTClient().Post().AbsPath("/api/v1/nodes/east/proxy/reserve/east/ns/pod").Do(t.Context()).StatusCode(&code).Raw()
		srv.Close()
		require.Error(t, err)
		res, err := answerOf(code, raw, err)
		require.Equal(t, api.Reservation{}, res)
		if tc.want == "" {
			require.NoError(t, err, "HTTP %d", tc.code)
			continue
		}
		require.ErrorContains(t, err, tc.want, "HTTP %d", tc.code)
	}
}
