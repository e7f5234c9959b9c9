package child

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/clock"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

// joiner gets a Target's node identity in its parent: the one stored, or
// a new one by joining with the bootstrap token (discovery, certificate
// signing request). Renewal asks it for the next certificate.
type joiner struct {
	target *v1alpha1.Target
	// client and secrets read the bootstrap token Secret in this cluster.
	client  kubernetes.Interface
	secrets *ownSecrets
	// store keeps the identities in this cluster.
	store *join.Store
	// own reaches this cluster's API server: a Target may not name it.
	own *rest.Config
	// status records the steps of a join that takes a while.
	status *runStatus
	clock  clock.PassiveClock
}

// identity returns the stored node identity, or joins to get one. After a
// join it also returns the parent as discovered, with what it published
// in nestlet-info moments ago (the kubelet API set-up takes it instead of
// reading it again); nil for a stored identity.
func (j *joiner) identity(ctx context.Context) (*join.Identity, *join.Parent, error) {
	t := j.target
	// A Target that never held an identity has none stored: no read.
	if t.Status.CertificateExpiry != nil || j.status.heldIdentity() {
		id, err := j.store.Load(ctx, t.Name, t.Spec.ParentURL, t.Spec.ClusterName, j.clock.Now())
		if err != nil || id != nil {
			return id, nil, err
		}
	}
	if isSelf(j.own, t.Spec.ParentURL, nil) {
		return nil, nil, selfTarget()
	}
	token, err := j.token(ctx)
	if err != nil {
		return nil, nil, err
	}
	j.status.progress(ctx, v1alpha1.ReasonJoining, "discovering the parent and checking the bootstrap token")
	parent, err := join.Discover(ctx, join.DiscoveryOptions{
		ParentURL: t.Spec.ParentURL, Token: token, CACertHash: t.Spec.CACertHash, CABundle: t.Spec.CABundle,
	})
	if err != nil {
		return nil, nil, err
	}
	if isSelf(j.own, t.Spec.ParentURL, parent.CAData) {
		return nil, nil, selfTarget()
	}
	bootstrap, done, err := join.OwnClient(&rest.Config{Host: parent.URL, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: parent.CAData}})
	if err != nil {
		return nil, nil, err
	}
	defer done()
	id, err := j.request(ctx, bootstrap, parent)
	if err != nil {
		return nil, nil, err
	}
	if err := j.store.Save(ctx, t.Name, id); err != nil {
		return nil, nil, err
	}
	return id, parent, nil
}

// request gets a node certificate for a new key from the parent through
// client (the bootstrap token's, or the current node identity's).
func (j *joiner) request(ctx context.Context, client kubernetes.Interface, parent *join.Parent) (*join.Identity, error) {
	t := j.target
	key, err := join.NewKey()
	if err != nil {
		return nil, err
	}
	cert, err := join.RequestNodeCertificate(ctx, client, t.Spec.ClusterName, key, func(csr string) {
		j.status.progress(ctx, v1alpha1.ReasonAwaitingApproval, fmt.Sprintf(
			"certificate signing request %s awaits approval in the parent: run 'nestctl approve %s' against the parent (or create tokens with 'nestctl token create --auto-approve')",
			csr, t.Spec.ClusterName))
	})
	if err != nil {
		return nil, err
	}
	return join.NewIdentity(parent, t.Spec.ClusterName, cert, key)
}

// token reads the bootstrap token from the Secret the Target names.
func (j *joiner) token(ctx context.Context) (string, error) {
	ref := j.target.Spec.BootstrapTokenSecretRef
	if ref.Namespace != j.store.Namespace {
		return "", join.Errorf(v1alpha1.ReasonTokenSecretError, nil,
			"the bootstrap token Secret %s/%s is outside the agent's namespace %s, where alone it reads Secrets: create it there "+
				"('kubectl create secret generic %s -n %s --from-literal=token=<token>', or 'nestctl join') and set spec.bootstrapTokenSecretRef.namespace to %s",
			ref.Namespace, ref.Name, j.store.Namespace, ref.Name, j.store.Namespace, j.store.Namespace)
	}
	sec := j.secrets.get(ref.Namespace, ref.Name)
	var err error
	if sec == nil {
		sec, err = j.client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	if err != nil {
		return "", join.Errorf(v1alpha1.ReasonTokenSecretError, err,
			"cannot read the bootstrap token Secret %s/%s: create it with 'nestctl join' or 'kubectl create secret generic %s -n %s --from-literal=token=<token>'",
			ref.Namespace, ref.Name, ref.Name, ref.Namespace)
	}
	token := strings.TrimSpace(string(sec.Data["token"]))
	if token == "" {
		return "", join.Errorf(v1alpha1.ReasonTokenSecretError, nil, "Secret %s/%s has no key 'token'", ref.Namespace, ref.Name)
	}
	return token, nil
}

func selfTarget() error {
	return join.Errorf(v1alpha1.ReasonSelfTarget, nil,
		"spec.parentURL points at this very cluster: a cluster cannot be its own parent; set the URL of another cluster's API server")
}

// isSelf reports whether parentURL is this cluster's own API server
// (reached with own), or parentCA one of this cluster's CA certificates.
func isSelf(own *rest.Config, parentURL string, parentCA []byte) bool {
	if sameEndpoint(own.Host, parentURL) {
		return true
	}
	if len(parentCA) == 0 {
		return false
	}
	cfg := rest.CopyConfig(own)
	if err := rest.LoadTLSFiles(cfg); err != nil || len(cfg.CAData) == 0 {
		return false
	}
	ours, err1 := certutil.ParseCertsPEM(cfg.CAData)
	theirs, err2 := certutil.ParseCertsPEM(parentCA)
	if err1 != nil || err2 != nil {
		return false
	}
	for _, a := range ours {
		for _, b := range theirs {
			if a.Equal(b) || bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo) {
				return true
			}
		}
	}
	return false
}

func sameEndpoint(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return ua.Scheme == ub.Scheme && strings.EqualFold(ua.Host, ub.Host)
}
