package join

import (
	"context"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/nestlet/nestlet/api"
)

// Verdict is what CheckNodeRequest decided.
type Verdict struct {
	Allowed bool
	Message string
}

// TokenGrant is what a bootstrap token admits: the one child name it was
// made for (empty: any name no live node holds) and whether the parent's
// agent approves its requests without `nestctl approve`.
type TokenGrant struct {
	ID          string
	ChildName   string
	AutoApprove bool
}

// GrantOf reads the grant of the bootstrap token that filed csr from the
// request itself: the token's extra groups (api.GroupTokenChildPrefix,
// api.GroupTokenAutoApprove), which the API server wrote into
// spec.groups and no requester can forge. ok is false when csr was not
// filed with a bootstrap token.
func GrantOf(csr *certificatesv1.CertificateSigningRequest) (g TokenGrant, ok bool) {
	g.ID, ok = strings.CutPrefix(csr.Spec.Username, bootstrapapi.BootstrapUserPrefix)
	if !ok {
		return TokenGrant{}, false
	}
	for _, group := range csr.Spec.Groups {
		if name, found := strings.CutPrefix(group, api.GroupTokenChildPrefix); found {
			g.ChildName = name
		}
		if group == api.GroupTokenAutoApprove {
			g.AutoApprove = true
		}
	}
	return g, true
}

// NodeGetter finds a node of this cluster by name, or returns an error
// that apierrors.IsNotFound recognises.
type NodeGetter func(ctx context.Context, name string) (*corev1.Node, error)

// LiveNodes reads nodes from the API server.
func LiveNodes(client kubernetes.Interface) NodeGetter {
	return func(ctx context.Context, name string) (*corev1.Node, error) {
		return client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
}

// CheckNodeRequest decides whether csr, filed with the bootstrap token
// whose grant is token, may get a node certificate: it must ask for
// exactly a node identity (CheckNodeCSR), for the name the token was made
// for, or, with a token made for no name, for a name no node of this
// cluster holds, Ready or not, and not one of the API server's (ReservedName). `nestctl approve` and the approver both decide with it.
func CheckNodeRequest(ctx context.Context, nodes NodeGetter, csr *certificatesv1.CertificateSigningRequest, token TokenGrant, revoked Revocations) (Verdict, error) {
	node, err := CheckNodeCSR(csr.Spec.Request, csr.Spec.Usages)
	if err != nil {
		return Verdict{Message: fmt.Sprintf("not a node client certificate request: %v", err)}, nil
	}
	if v, err := checkRevoked(ctx, revoked, node); err != nil || v != nil {
		return *v, err
	}
	if v := CheckLifetime(csr); v != nil {
		return *v, nil
	}
	id := token.ID
	if want := token.ChildName; want != "" {
		if want != node {
			return Verdict{Message: fmt.Sprintf("bootstrap token %s was made for child %q; this request asks for node %q: make a token for that child (nestctl token create --child-name %s)", id, want, node, node)}, nil
		}
		return Verdict{Allowed: true, Message: fmt.Sprintf("node %q joins with bootstrap token %s, made for it", node, id)}, nil
	}
	if what := ReservedName(node); what != "" {
		return Verdict{Message: fmt.Sprintf("node name %q is %s: a bootstrap token made for no child (%s) cannot take it; name the child otherwise", node, what, id)}, nil
	}
	n, err := nodes(ctx, node)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return Verdict{}, err
	default:
		// Ready or not: a node not Ready is still its owner's (a child
		// cut off for a while, a kubelet restarting).
		state := "and is Ready"
		if !nodeReady(n) {
			state = "(not Ready)"
		}
		return Verdict{Message: fmt.Sprintf("node %q exists %s: a bootstrap token made for no child (%s) cannot take a node's name; "+
			"make one for it (nestctl token create --child-name %s), or remove the node if that child is gone", node, state, id, node)}, nil
	}
	return Verdict{Allowed: true, Message: fmt.Sprintf("node %q joins with bootstrap token %s, made for any child, and no node has that name", node, id)}, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ReservedName says why name, as a node's name and so as the DNS name of
// its serving certificate, would pass for the API server or a Service
// ("the API server's name", "a Service's DNS name", "localhost"), or "".
// A child of such a name gets no certificate: every pod trusts the
// cluster's CA for those names.
func ReservedName(name string) string {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	switch {
	case name == "kubernetes" || name == "kubernetes.default" || strings.HasPrefix(name, "kubernetes.default."):
		return "the API server's name"
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return "localhost"
	case strings.HasSuffix(name, ".svc") || strings.Contains(name, ".svc."):
		return "a Service's DNS name"
	}
	return ""
}

// CheckRenewal decides whether csr, filed by a node for a new certificate
// of its own name (a renewal), may be approved: unless that node was
// revoked.
func CheckRenewal(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, revoked Revocations) (Verdict, error) {
	node, err := CheckNodeCSR(csr.Spec.Request, csr.Spec.Usages)
	if err != nil {
		return Verdict{Message: fmt.Sprintf("not a node client certificate request: %v", err)}, nil
	}
	if csr.Spec.Username != NodeUser(node) {
		return Verdict{Message: fmt.Sprintf("filed by %s, not by node %q itself", csr.Spec.Username, node)}, nil
	}
	if v, err := checkRevoked(ctx, revoked, node); err != nil || v != nil {
		return *v, err
	}
	return Verdict{Allowed: true, Message: fmt.Sprintf("node %q renews its own certificate", node)}, nil
}

// Revocations says whether node was revoked in this cluster (`nestctl
// revoke`, api.RevokedConfigMap), and when and why: the value of its key.
type Revocations func(ctx context.Context, node string) (when string, revoked bool, err error)

// RevocationsIn reads client's api.RevokedConfigMap at each call (the
// parent's agent follows it with pkg/revoked instead).
func RevocationsIn(client kubernetes.Interface) Revocations {
	return func(ctx context.Context, node string) (string, bool, error) {
		cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, api.RevokedConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		when, ok := cm.Data[node]
		return when, ok, nil
	}
}

// CheckLifetime is the denial of a child's certificate request that asks
// for more than NodeCertificateLifetime (or names no lifetime, so that the
// signer's own, a year by default, would apply), nil for one within it: a
// child's certificate lives no longer than a day, whatever it asks.
func CheckLifetime(csr *certificatesv1.CertificateSigningRequest) *Verdict {
	limit := int32(NodeCertificateLifetime / time.Second)
	switch s := csr.Spec.ExpirationSeconds; {
	case s == nil:
		return &Verdict{Message: fmt.Sprintf("the request names no lifetime (spec.expirationSeconds), so the signer's default would apply: a child's certificate may live %s at most; ask for %d seconds or less", NodeCertificateLifetime, limit)}
	case *s > limit:
		return &Verdict{Message: fmt.Sprintf("the request asks for %s (spec.expirationSeconds %d): a child's certificate may live %s at most; ask for %d seconds or less", time.Duration(*s)*time.Second, *s, NodeCertificateLifetime, limit)}
	}
	return nil
}

// checkRevoked is the denial of a revoked node's request, nil for another.
func checkRevoked(ctx context.Context, revoked Revocations, node string) (*Verdict, error) {
	when, ok, err := revoked(ctx, node)
	if err != nil {
		return &Verdict{}, err
	}
	if !ok {
		return nil, nil
	}
	return &Verdict{Message: fmt.Sprintf("node %q was revoked in this cluster (%s): its certificates are no longer issued or renewed; to let it back, remove its key from configmap %s/%s and give it a new token",
		node, when, metav1.NamespaceSystem, api.RevokedConfigMap)}, nil
}
