package agent

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

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

// identity returns the stored node identity, or joins to get one.
func (r *targetRun) identity(ctx context.Context) (*join.Identity, error) {
	t := r.target
	store := r.a.store()
	// A Target that never held an identity has none stored: no read.
	if t.Status.CertificateExpiry != nil || r.heldIdentity() {
		id, err := store.Load(ctx, t.Name, t.Spec.ParentURL, t.Spec.ClusterName, r.a.cfg.Clock.Now())
		if err != nil || id != nil {
			return id, err
		}
	}
	if r.isSelf(t.Spec.ParentURL, nil) {
		return nil, selfTarget()
	}
	token, err := r.token(ctx)
	if err != nil {
		return nil, err
	}
	r.progress(ctx, v1alpha1.ReasonJoining, "discovering the parent and checking the bootstrap token")
	parent, err := join.Discover(ctx, join.DiscoveryOptions{
		ParentURL: t.Spec.ParentURL, Token: token, CACertHash: t.Spec.CACertHash, CABundle: t.Spec.CABundle,
	})
	if err != nil {
		return nil, err
	}
	if r.isSelf(t.Spec.ParentURL, parent.CAData) {
		return nil, selfTarget()
	}
	bootstrap, err := kubernetes.NewForConfig(&rest.Config{Host: parent.URL, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: parent.CAData}})
	if err != nil {
		return nil, err
	}
	id, err := r.requestIdentity(ctx, bootstrap, parent)
	if err != nil {
		return nil, err
	}
	if err := store.Save(ctx, t.Name, id); err != nil {
		return nil, err
	}
	r.discovered = &parent.Info // read moments ago: the kubelet API set-up uses it
	return id, nil
}

func (r *targetRun) requestIdentity(ctx context.Context, client kubernetes.Interface, parent *join.Parent) (*join.Identity, error) {
	t := r.target
	key, err := join.NewKey()
	if err != nil {
		return nil, err
	}
	cert, err := join.RequestNodeCertificate(ctx, client, t.Spec.ClusterName, key, func(csr string) {
		r.progress(ctx, v1alpha1.ReasonAwaitingApproval, fmt.Sprintf(
			"certificate signing request %s awaits approval in the parent: run 'nestctl approve %s' against the parent (or create tokens with 'nestctl token create --auto-approve')",
			csr, t.Spec.ClusterName))
	})
	if err != nil {
		return nil, err
	}
	return join.NewIdentity(parent, t.Spec.ClusterName, cert, key)
}

// token reads the bootstrap token from the Secret the Target names.
func (r *targetRun) token(ctx context.Context) (string, error) {
	ref := r.target.Spec.BootstrapTokenSecretRef
	sec := r.a.secrets.get(ref.Namespace, ref.Name)
	var err error
	if sec == nil {
		sec, err = r.a.client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
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

// isSelf reports whether parentURL is this cluster's own API server, or
// parentCA one of this cluster's CA certificates.
func (r *targetRun) isSelf(parentURL string, parentCA []byte) bool {
	own := r.a.cfg.RESTConfig
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
