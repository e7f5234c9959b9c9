package kubeletapi

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apiserver/pkg/authentication/user"
)

// The kubelet's mapping of requests to what is authorised on the node.
func TestRequestAttributes(t *testing.T) {
	u := &user.DefaultInfo{Name: "alice"}
	for _, tt := range []struct {
		method, path, verb, subresource string
	}{
		{"GET", "/containerLogs/ns/pod/app", "get", "proxy"},
		{"POST", "/exec/ns/pod/app", "create", "proxy"},
		{"GET", "/exec/ns/pod/app", "create", "proxy"}, // a WebSocket upgrade
		{"GET", "/attach/ns/pod/app", "create", "proxy"},
		{"GET", "/portForward/ns/pod", "create", "proxy"},
		{"GET", "/run/ns/pod/app", "create", "proxy"},
		{"GET", "/executive", "get", "proxy"},
		{"POST", "/portForward/ns/pod", "create", "proxy"},
		{"GET", "/stats/summary", "get", "stats"},
		{"GET", "/stats", "get", "stats"},
		{"GET", "/statsfoo", "get", "proxy"},
		{"GET", "/metrics/resource", "get", "metrics"},
		{"GET", "/logs/", "get", "log"},
		{"PUT", "/pods", "update", "proxy"},
		{"PATCH", "/pods", "patch", "proxy"},
		{"DELETE", "/pods", "delete", "proxy"},
	} {
		a := requestAttributes(u, httptest.NewRequest(tt.method, tt.path, nil), "child")
		assert.Equal(t, tt.verb, a.GetVerb(), "%s %s", tt.method, tt.path)
		assert.Equal(t, tt.subresource, a.GetSubresource(), "%s %s", tt.method, tt.path)
		assert.Equal(t, "nodes", a.GetResource())
		assert.Equal(t, "child", a.GetName())
		assert.Equal(t, "alice", a.GetUser().GetName())
		assert.True(t, a.IsResourceRequest())
	}
}
