package kubelet

import (
	"fmt"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
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
		WebhookRetryBackoff:                options.DefaultAuthWebhookRetryBackoff(),
		ClientCertificateCAContentProvider: ca,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       options.DefaultAuthWebhookRetryBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	return &Auth{authn: authn, authz: authz}, nil
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
	attrs := nodeutil.NodeRequestAttr{NodeName: nodeName}.GetRequestAttributes(u, r)
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
