package join

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"

	"github.com/nestlet/nestlet/api"
)

// Identity is this cluster's node identity in one parent: a key, the
// certificate the parent issued for it, and the parent's CA.
type Identity struct {
	ParentURL   string
	ClusterName string
	// ParentClusterName is the parent's own name, when it publishes one.
	ParentClusterName string
	CAData            []byte
	CertData          []byte
	KeyData           []byte

	cert *x509.Certificate
}

// Secret keys and annotations of a stored identity.
const (
	annotationParentURL   = "nestlet.io/parent-url"
	annotationClusterName = "nestlet.io/cluster-name"
	annotationParentName  = "nestlet.io/parent-cluster-name"
	keyCA                 = "ca.crt"
)

// NewKey returns a new private key for a node identity.
func NewKey() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// NewIdentity builds an Identity from its parts and checks that they match.
func NewIdentity(parent *Parent, clusterName string, certData []byte, key crypto.Signer) (*Identity, error) {
	keyData, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	id := &Identity{ParentURL: parent.URL, ClusterName: clusterName, ParentClusterName: parent.ClusterName, CAData: parent.CAData, CertData: certData, KeyData: keyData}
	if err := id.parse(); err != nil {
		return nil, err
	}
	return id, nil
}

func (id *Identity) parse() error {
	pair, err := tls.X509KeyPair(id.CertData, id.KeyData)
	if err != nil {
		return fmt.Errorf("node certificate and key do not match: %w", err)
	}
	id.cert, err = x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("parsing node certificate: %w", err)
	}
	if want := NodeUser(id.ClusterName); id.cert.Subject.CommonName != want {
		return fmt.Errorf("node certificate is for %q, not %q", id.cert.Subject.CommonName, want)
	}
	return nil
}

// NotAfter is when the certificate expires.
func (id *Identity) NotAfter() time.Time { return id.cert.NotAfter }

// RenewAt is when the certificate should be renewed: at 80% of its life.
func (id *Identity) RenewAt() time.Time {
	life := id.cert.NotAfter.Sub(id.cert.NotBefore)
	// Divide first: life*4 overflows a Duration beyond ~73 years (a
	// --cluster-signing-duration of 100 years is not unheard of).
	return id.cert.NotBefore.Add(life / 5 * 4)
}

// RESTConfig returns a client config authenticated as the node.
func (id *Identity) RESTConfig() *rest.Config {
	return &rest.Config{
		Host: id.ParentURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: id.CAData, CertData: id.CertData, KeyData: id.KeyData,
		},
		// Every forwarded pod's status and events go through this client;
		// the parent's API priority and fairness protects the server, so
		// the client does not throttle itself to a trickle.
		QPS:   500,
		Burst: 1000,
	}
}

// Store keeps identities in Secrets of one namespace of this cluster.
type Store struct {
	Client    kubernetes.Interface
	Namespace string
	// Cached (optional) returns the Secret of that name in Namespace as a
	// watch of the namespace last saw it, nil when it has none (or has not
	// listed the namespace yet): Load then reads it from the API server.
	Cached func(name string) *corev1.Secret
}

// Load returns the stored identity of target when it is for this parent and
// cluster name and has not expired; nil otherwise. The caller renews it
// from RenewAt on.
func (s *Store) Load(ctx context.Context, target, parentURL, clusterName string, now time.Time) (*Identity, error) {
	var sec *corev1.Secret
	if s.Cached != nil {
		sec = s.Cached(api.IdentitySecretName(target))
	}
	if sec == nil {
		var err error
		sec, err = s.Client.CoreV1().Secrets(s.Namespace).Get(ctx, api.IdentitySecretName(target), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading identity secret: %w", err)
		}
	}
	if sec.Annotations[annotationParentURL] != parentURL || sec.Annotations[annotationClusterName] != clusterName {
		return nil, nil
	}
	id := &Identity{ParentURL: parentURL, ClusterName: clusterName, ParentClusterName: sec.Annotations[annotationParentName], CAData: sec.Data[keyCA],
		CertData: sec.Data[corev1.TLSCertKey], KeyData: sec.Data[corev1.TLSPrivateKeyKey]}
	if err := id.parse(); err != nil {
		return nil, nil //nolint:nilerr // a broken stored identity is replaced
	}
	if !now.Before(id.NotAfter()) {
		return nil, nil
	}
	return id, nil
}

// Save writes the identity of target.
func (s *Store) Save(ctx context.Context, target string, id *Identity) error {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      api.IdentitySecretName(target),
			Namespace: s.Namespace,
			Annotations: map[string]string{
				annotationParentURL:   id.ParentURL,
				annotationClusterName: id.ClusterName,
				annotationParentName:  id.ParentClusterName,
			},
			Labels: map[string]string{"app.kubernetes.io/managed-by": "nestlet"},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: id.CertData, corev1.TLSPrivateKeyKey: id.KeyData, keyCA: id.CAData},
	}
	opts := metav1.CreateOptions{FieldManager: api.FieldManager}
	_, err := s.Client.CoreV1().Secrets(s.Namespace).Create(ctx, sec, opts)
	if apierrors.IsAlreadyExists(err) {
		_, err = s.Client.CoreV1().Secrets(s.Namespace).Update(ctx, sec, metav1.UpdateOptions{FieldManager: api.FieldManager})
	}
	if err != nil {
		return fmt.Errorf("saving identity secret: %w", err)
	}
	return nil
}

// Delete removes the identity of target.
func (s *Store) Delete(ctx context.Context, target string) error {
	err := s.Client.CoreV1().Secrets(s.Namespace).Delete(ctx, api.IdentitySecretName(target), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting identity secret: %w", err)
	}
	return nil
}
