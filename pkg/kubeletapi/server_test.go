package kubeletapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	streamportforward "k8s.io/kubelet/pkg/cri/streaming/portforward"
	streamremotecommand "k8s.io/kubelet/pkg/cri/streaming/remotecommand"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// fakeDelegates maps parent pods (namespace/name) to their delegates.
type fakeDelegates struct {
	parents   []*corev1.Pod
	delegates map[string]*corev1.Pod
	// err, when set, is what Delegate returns for every pod.
	err error
}

func (f *fakeDelegates) Delegate(namespace, name string) (*corev1.Pod, error) {
	if f.err != nil {
		return nil, f.err
	}
	d, ok := f.delegates[namespace+"/"+name]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s has no delegate", namespace, name)
	}
	return d, nil
}

func (f *fakeDelegates) GetPods(context.Context) ([]*corev1.Pod, error) {
	return f.parents, nil
}

func pod(namespace, name, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid)}}
}

func TestNew(t *testing.T) {
	valid := func() Config {
		return Config{
			NodeName:    "vnode",
			Delegates:   &fakeDelegates{},
			Child:       fake.NewClientset(),
			ChildConfig: &rest.Config{Host: "https://child.example"},
		}
	}
	tests := []struct {
		name      string
		mutate    func(*Config)
		wantField string // the missing field named by the error; "" when valid
		wantIdle  time.Duration
		wantCreat time.Duration
	}{
		{name: "all required fields, defaults filled", mutate: func(*Config) {}, wantIdle: 4 * time.Hour, wantCreat: 30 * time.Second},
		{
			name: "explicit timeouts are kept",
			mutate: func(c *Config) {
				c.StreamIdleTimeout = time.Minute
				c.StreamCreationTimeout = time.Second
			},
			wantIdle: time.Minute, wantCreat: time.Second,
		},
		{name: "no NodeName", mutate: func(c *Config) { c.NodeName = "" }, wantField: "NodeName"},
		{name: "no Delegates", mutate: func(c *Config) { c.Delegates = nil }, wantField: "Delegates"},
		{name: "no Child", mutate: func(c *Config) { c.Child = nil }, wantField: "Child"},
		{name: "no ChildConfig", mutate: func(c *Config) { c.ChildConfig = nil }, wantField: "ChildConfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.mutate(&cfg)
			s, err := New(cfg)
			if tt.wantField != "" {
				require.ErrorIs(t, err, ErrMissingField)
				assert.Contains(t, err.Error(), tt.wantField)
				assert.Nil(t, s)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantIdle, s.cfg.StreamIdleTimeout)
			assert.Equal(t, tt.wantCreat, s.cfg.StreamCreationTimeout)
			assert.Equal(t, "vnode", s.cfg.NodeName)
		})
	}
}

// newTestServer is a Server on a fake child clientset whose only delegate
// is parent-ns/web -> child-ns/parent-ns-web.
func newTestServer(t *testing.T, delegates *fakeDelegates) (*Server, *fake.Clientset) {
	t.Helper()
	if delegates == nil {
		delegates = &fakeDelegates{
			parents:   []*corev1.Pod{pod("parent-ns", "web", "uid-web")},
			delegates: map[string]*corev1.Pod{"parent-ns/web": pod("child-ns", "parent-ns-web", "uid-delegate")},
		}
	}
	client := fake.NewClientset()
	s, err := New(Config{
		NodeName:    "vnode",
		Delegates:   delegates,
		Child:       client,
		ChildConfig: &rest.Config{Host: "https://child.example"},
	})
	require.NoError(t, err)
	return s, client
}

var errBoom = errors.New("boom")

// fakeChild is the child's API server for the streaming subresources of
// its one pod, child-ns/parent-ns-web: a kubelet's own streaming server
// (k8s.io/kubelet/pkg/cri/streaming, SPDY) behind the API server's paths,
// and for WebSocket callers the API server's own stream translator in
// front of it, so that the protocols the Server speaks are the real ones.
type fakeChild struct {
	exec   func(cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error
	attach func(in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error
	// forward serves one port-forward connection.
	forward func(port int32, stream io.ReadWriteCloser) error
	// noWebSockets makes the server refuse WebSocket upgrades, as one
	// that only speaks SPDY.
	noWebSockets bool
	// nodes are this cluster's nodes (in order) and the body of their
	// stats/summary ("" for an error); nil: the Server has no Nodes.
	nodes [][2]string

	mu       sync.Mutex
	requests []childRequest
}

// childRequest is what fakeChild was asked.
type childRequest struct {
	Method      string
	WebSocket   bool
	Namespace   string
	Name        string
	Subresource string
	Query       url.Values
	// Translated: the SPDY request of the API server's stream translator
	// for a WebSocket request.
	Translated bool
}

// start serves f and returns a Server whose child it is.
func (f *fakeChild) start(t *testing.T) *Server {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	s, err := New(Config{
		NodeName: "vnode",
		Delegates: &fakeDelegates{
			parents:   []*corev1.Pod{pod("parent-ns", "web", "uid-web")},
			delegates: map[string]*corev1.Pod{"parent-ns/web": pod("child-ns", "parent-ns-web", "uid-delegate")},
		},
		Child:       client,
		ChildConfig: cfg,
		Nodes:       f.nodeList(),
	})
	require.NoError(t, err)
	return s
}

func (f *fakeChild) nodeList() func() ([]*corev1.Node, error) {
	if f.nodes == nil {
		return nil
	}
	return func() ([]*corev1.Node, error) {
		var out []*corev1.Node
		for _, n := range f.nodes {
			out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n[0]}})
		}
		return out, nil
	}
}

// calls are the requests of the Server, without those of the stream
// translator.
func (f *fakeChild) calls() []childRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(f.requests), func(r childRequest) bool { return r.Translated })
}

func (f *fakeChild) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(r.URL.Path, "/")
	// /api/v1/nodes/{name}/proxy/stats/summary
	if len(parts) == 8 && parts[3] == "nodes" && parts[5] == "proxy" && r.Method == http.MethodGet {
		for _, n := range f.nodes {
			if n[0] == parts[4] && n[1] != "" && strings.Join(parts[6:], "/") == "stats/summary" {
				_, _ = io.WriteString(w, n[1])
				return
			}
		}
		http.Error(w, "no summary", http.StatusInternalServerError)
		return
	}
	// /api/v1/namespaces/{namespace}/pods/{name}/{subresource}
	if len(parts) != 8 || parts[1] != "api" || parts[2] != "v1" || parts[3] != "namespaces" || parts[5] != "pods" {
		http.Error(w, "unexpected path "+r.URL.Path, http.StatusBadRequest)
		return
	}
	req := childRequest{
		Method: r.Method, WebSocket: wsstream.IsWebSocketRequest(r),
		Namespace: parts[4], Name: parts[6], Subresource: parts[7], Query: r.URL.Query(),
		Translated: r.URL.Query().Get("translated") == "true",
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()

	if f.noWebSockets && req.WebSocket {
		http.Error(w, "this server speaks SPDY only", http.StatusBadRequest)
		return
	}
	if req.Namespace != "child-ns" || req.Name != "parent-ns-web" {
		status := apierrors.NewNotFound(corev1.Resource("pods"), req.Name).Status()
		status.APIVersion, status.Kind = "v1", "Status"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(status)
		return
	}
	const idle, creation = time.Minute, 10 * time.Second
	switch req.Subresource {
	case "exec", "attach":
		q := r.URL.Query()
		if req.WebSocket {
			// WebSocket (v5) callers are served by the API server's stream
			// translator, which calls the kubelet with SPDY.
			q.Set("translated", "true")
			loc := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawQuery: q.Encode()}
			apiproxy.NewStreamTranslatorHandler(loc, nil, 0, apiproxy.Options{
				Stdin: q.Get("stdin") == "true", Stdout: q.Get("stdout") == "true", Stderr: q.Get("stderr") == "true", Tty: q.Get("tty") == "true",
			}).ServeHTTP(w, r)
			return
		}
		// The API server passes PodExecOptions on under the kubelet's
		// names and values.
		for from, to := range map[string]string{"stdin": corev1.ExecStdinParam, "stdout": corev1.ExecStdoutParam, "stderr": corev1.ExecStderrParam, "tty": corev1.ExecTTYParam} {
			if q.Get(from) == "true" {
				q.Set(to, "1")
			}
		}
		r.URL.RawQuery = q.Encode()
		opts, err := streamremotecommand.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Subresource == "exec" {
			streamremotecommand.ServeExec(w, r, execFunc(f.exec), req.Name, "", req.Query.Get("container"), req.Query["command"],
				opts, idle, creation, remotecommandconsts.SupportedStreamingProtocols)
			return
		}
		streamremotecommand.ServeAttach(w, r, attachFunc(f.attach), req.Name, "", req.Query.Get("container"),
			opts, idle, creation, remotecommandconsts.SupportedStreamingProtocols)
	case "portforward":
		streamportforward.ServePortForward(w, r, forwardFunc(f.forward), req.Name, "", &streamportforward.V4Options{},
			idle, creation, streamportforward.SupportedProtocols)
	default:
		http.Error(w, "unexpected subresource "+req.Subresource, http.StatusNotFound)
	}
}

type execFunc func(cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error

func (f execFunc) ExecInContainer(_ context.Context, _ string, _ types.UID, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	return f(cmd, in, out, errOut, tty, resize)
}

type attachFunc func(in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error

func (f attachFunc) AttachContainer(_ context.Context, _ string, _ types.UID, _ string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	return f(in, out, errOut, tty, resize)
}

type forwardFunc func(port int32, stream io.ReadWriteCloser) error

func (f forwardFunc) PortForward(_ context.Context, _ string, _ types.UID, port int32, stream io.ReadWriteCloser) error {
	return f(port, stream)
}

// fakeAttach is the caller's side of an exec or attach session.
type fakeAttach struct {
	stdin          io.Reader
	stdout, stderr *buffer
	tty            bool
	resize         chan api.TermSize
}

func (a *fakeAttach) Stdin() io.Reader { return a.stdin }

func (a *fakeAttach) Stdout() io.WriteCloser {
	if a.stdout == nil {
		return nil
	}
	return a.stdout
}

func (a *fakeAttach) Stderr() io.WriteCloser {
	if a.stderr == nil {
		return nil
	}
	return a.stderr
}

func (a *fakeAttach) TTY() bool                   { return a.tty }
func (a *fakeAttach) Resize() <-chan api.TermSize { return a.resize }

// buffer is a WriteCloser safe for concurrent use.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) Close() error { return nil }

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
