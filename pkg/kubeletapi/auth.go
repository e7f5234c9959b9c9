package kubeletapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Auth authenticates and authorises kubelet API callers against a cluster,
// as a kubelet in webhook mode does: an x509 client certificate signed by
// the cluster's client CA (how a kube-apiserver calls kubelets) or a bearer
// token checked with a TokenReview, then a SubjectAccessReview for the
// node's subresource (nodes/proxy, nodes/log, nodes/stats...). Anonymous
// requests are refused with 401.
type Auth struct {
	authn authenticator.Request
	authz authorizer.Authorizer
}

// NewAuth builds an Auth that asks the cluster behind client, and trusts
// the client certificates clientCA (PEM) signs.
func NewAuth(client kubernetes.Interface, clientCA []byte) (*Auth, error) {
	ca, err := dynamiccertificates.NewStaticCAContent("client-ca", clientCA)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		CacheTTL:                           2 * time.Minute,
		TokenAccessReviewClient:            client.AuthenticationV1(),
		WebhookRetryBackoff:                webhookBackoff(),
		ClientCertificateCAContentProvider: ca,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       webhookBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return &Auth{authn: authn, authz: authz}, nil
}

// webhookBackoff is how TokenReviews and SubjectAccessReviews are retried:
// k8s.io/apiserver's default for delegated auth (its options package, which
// would bring the whole API server library into the binary).
func webhookBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// requestAttributes maps a kubelet API request to what is authorised, as
// the kubelet does: verb from the method (create for exec, attach,
// port-forward and run whatever the method), and subresource stats,
// metrics, log (for /logs) or proxy (everything else: exec, attach,
// port-forward, containerLogs, pods...) of the node.
func requestAttributes(u user.Info, r *http.Request, nodeName string) authorizer.Attributes {
	verb := map[string]string{
		http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update",
		http.MethodPatch: "patch", http.MethodDelete: "delete",
	}[r.Method]
	sub := "proxy"
	under := func(prefix string) bool {
		return r.URL.Path == prefix || strings.HasPrefix(r.URL.Path, prefix+"/")
	}
	switch {
	case under("/stats"):
		sub = "stats"
	case under("/metrics"):
		sub = "metrics"
	case under("/logs"):
		sub = "log"
	case under("/exec"), under("/attach"), under("/portForward"), under("/run"):
		// Streams that act in a container are created, whatever the
		// method: a WebSocket upgrade is a GET, and `get nodes/proxy`
		// (a read, granted to monitoring) must not open a shell. The
		// API server authorises such an upgrade of pods/exec as create
		// too.
		verb = "create"
	}
	return authorizer.AttributesRecord{
		User: u, Verb: verb, APIVersion: "v1", Resource: "nodes", Subresource: sub, Name: nodeName,
		ResourceRequest: true, Path: r.URL.Path,
	}
}

// Check authenticates r and authorises it on the node nodeName. It writes
// 401 or 403 (or 500 when the cluster cannot be asked) and returns false
// when the request must not go on.
func (a *Auth) Check(w http.ResponseWriter, r *http.Request, nodeName string) bool {
	u, ok := a.Authenticate(w, r)
	return ok && a.Authorize(w, r, u, nodeName)
}

// Authenticate returns the caller of r, or writes 401 and returns false.
func (a *Auth) Authenticate(w http.ResponseWriter, r *http.Request) (user.Info, bool) {
	resp, ok, err := a.authn.AuthenticateRequest(r)
	if err != nil || !ok {
		klog.FromContext(r.Context()).V(2).Info("Refused unauthenticated kubelet API request", "path", r.URL.Path, "err", err)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return nil, false
	}
	return resp.User, true
}

// Authorize asks whether u may make request r on the node nodeName, or
// writes 403 (500 when the cluster cannot be asked) and returns false.
func (a *Auth) Authorize(w http.ResponseWriter, r *http.Request, u user.Info, nodeName string) bool {
	attrs := requestAttributes(u, r, nodeName)
	decision, reason, err := a.authz.Authorize(r.Context(), attrs)
	if err != nil {
		http.Error(w, fmt.Sprintf("authorizing %s: %v", u.GetName(), err), http.StatusInternalServerError)
		return false
	}
	if decision != authorizer.DecisionAllow {
		msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", u.GetName(), attrs.GetVerb(), attrs.GetSubresource())
		if reason != "" {
			msg += ": " + reason
		}
		http.Error(w, msg, http.StatusForbidden)
		return false
	}
	return true
}

// Wrap serves h for nodeName once Check passes.
func (a *Auth) Wrap(nodeName string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.Check(w, r, nodeName) {
			h.ServeHTTP(w, r)
		}
	})
}
