package kubeletapi

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
)

// logsPrefix is the kubelet's container logs route:
// /containerLogs/{namespace}/{pod}/{container}.
const logsPrefix = "/containerLogs/"

// serveLogs streams the logs of the delegate's container from this
// cluster's API server. The kubelet's query parameters are those of
// PodLogOptions (follow, tailLines, sinceSeconds, sinceTime, previous,
// timestamps, limitBytes), so they are decoded as such and passed on
// unchanged, an explicit tailLines=0 included. Nothing is buffered beyond
// one read: a follow stream lasts as long as the caller reads, each chunk
// flushed as it arrives.
func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, logsPrefix), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		http.Error(w, "expected /containerLogs/{namespace}/{pod}/{container}", http.StatusNotFound)
		return
	}
	opts, err := logOptions(r, parts[2])
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d, err := s.cfg.Delegates.Delegate(parts[0], parts[1])
	if err != nil {
		writeError(w, err)
		return
	}
	rc, err := s.cfg.Child.CoreV1().Pods(d.Namespace).GetLogs(d.Name, opts).Stream(r.Context())
	if err != nil {
		writeError(w, childError(err))
		return
	}
	defer func() { _ = rc.Close() }()
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(flushWriter{w}, rc); err != nil && r.Context().Err() == nil {
		klog.FromContext(r.Context()).V(4).Info("Log stream ended", "pod", parts[0]+"/"+parts[1], "err", err)
	}
}

// logOptions reads the kubelet's log query (the names and formats of
// PodLogOptions' query parameters) for container. Unknown parameters are
// ignored, as a kubelet does.
func logOptions(r *http.Request, container string) (*corev1.PodLogOptions, error) {
	q := r.URL.Query()
	opts := &corev1.PodLogOptions{Container: container}
	for name, dst := range map[string]*bool{"follow": &opts.Follow, "previous": &opts.Previous, "timestamps": &opts.Timestamps} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("query parameter %s=%q: %w", name, v, err)
			}
			*dst = b
		}
	}
	for name, dst := range map[string]**int64{"tailLines": &opts.TailLines, "limitBytes": &opts.LimitBytes, "sinceSeconds": &opts.SinceSeconds} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("query parameter %s=%q: %w", name, v, err)
			}
			*dst = &n
		}
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, fmt.Errorf("query parameter sinceTime=%q: %w", v, err)
		}
		mt := metav1.NewTime(t)
		opts.SinceTime = &mt
	}
	if v := q.Get("stream"); v != "" {
		opts.Stream = &v
	}
	return opts, nil
}

// writeError writes err with the status virtual-kubelet's classes map to.
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errdefs.IsNotFound(err):
		code = http.StatusNotFound
	case errdefs.IsInvalidInput(err):
		code = http.StatusBadRequest
	}
	http.Error(w, err.Error(), code)
}

// flushWriter flushes after every write, so that each log line reaches the
// caller as it is written.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}
