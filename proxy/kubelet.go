package proxy

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/pkg/tunnel"
)

// podRoutes are the kubelet API routes that name a pod, by their first
// path segment: /<route>/{namespace}/{pod}[/...].
var podRoutes = map[string]bool{
	"containerLogs": true,
	"exec":          true,
	"attach":        true,
	"portForward":   true,
	"run":           true,
}

// podOf returns the namespace and pod a kubelet API path is about.
func podOf(path string) (namespace, pod string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) < 3 || !podRoutes[parts[0]] || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// serveKubelet routes a kubelet API request to the tunnel of the node its
// pod is bound to, once the caller is authenticated and authorised on that
// node.
func (p *Proxy) serveKubelet(w http.ResponseWriter, r *http.Request) {
	// Authenticated first: an anonymous caller costs no API call and
	// learns nothing.
	caller, ok := p.auth.Authenticate(w, r)
	if !ok {
		return
	}
	if node, _, _, ok := api.ParseReservePath(r.URL.Path); ok {
		// A reservation names its node: the pod is not bound yet.
		if p.auth.Authorize(w, r, caller, node) {
			p.throughTunnel(w, r, node, fmt.Sprintf("node %q", node))
		}
		return
	}
	ns, name, ok := podOf(r.URL.Path)
	if !ok {
		if p.auth.Authorize(w, r, caller, "") {
			http.Error(w, fmt.Sprintf("nestlet-proxy's shared port serves the pod routes of the kubelet API (%s) and reservations, not %s: node-level endpoints are served on each node's own port (nestlet-proxy --node-ports) or by agents in direct mode",
				"containerLogs, exec, attach, portForward, run", r.URL.Path), http.StatusNotFound)
		}
		return
	}
	pod, err := p.cfg.Client.CoreV1().Pods(ns).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		if !p.auth.Authorize(w, r, caller, "") {
			return
		}
		code := http.StatusBadGateway
		if apierrors.IsNotFound(err) {
			code = http.StatusNotFound
		}
		http.Error(w, fmt.Sprintf("looking up pod %s/%s: %v", ns, name, err), code)
		return
	}
	node := pod.Spec.NodeName
	if !p.auth.Authorize(w, r, caller, node) {
		return
	}
	p.throughTunnel(w, r, node, fmt.Sprintf("pod %s/%s is bound to node %q", ns, name, node))
}

// nodeHandler serves every kubelet API route of node (its own port,
// nodeports.go) through its tunnel, once the caller is authenticated and
// authorised on that node.
func (p *Proxy) nodeHandler(node string) http.Handler {
	return p.auth.Wrap(node, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.throughTunnel(w, r, node, fmt.Sprintf("node %q", node))
	}))
}

// throughTunnel sends r through the tunnel of node; what says which node
// it is, in the error when there is no such tunnel.
func (p *Proxy) throughTunnel(w http.ResponseWriter, r *http.Request, node, what string) {
	key, ok := p.tunnelKey(node)
	if node == "" || !ok {
		http.Error(w, fmt.Sprintf("%s, which has no tunnel to this nestlet-proxy: check that the agent of that child cluster is running and its Target Ready", what), http.StatusBadGateway)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = tunnel.Address
			pr.Out.Host = tunnel.Address
			// The caller is checked here; its credentials go no further.
			pr.Out.Header.Del("Authorization")
		},
		Transport:     &http.Transport{DialContext: p.tunnels.Dialer(key), DisableKeepAlives: true},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			klog.FromContext(r.Context()).Info("Tunnel request failed", "node", node, "path", r.URL.Path, "err", err)
			http.Error(w, fmt.Sprintf("through the tunnel of node %s: %v", node, err), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}
