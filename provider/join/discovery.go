package join

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pubkeypin"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/api/v1alpha1"
)

// Parent is what discovery learned about the parent.
type Parent struct {
	URL string
	// CAData is the parent's CA bundle (PEM), trusted from now on.
	CAData []byte
	// ClusterName is the parent's own name, when it publishes one
	// (kube-public/nestlet-info); empty otherwise.
	ClusterName string
	// Info is what kube-public/nestlet-info held at discovery (nil when
	// the parent has none), for the join that follows it.
	Info map[string]string
}

// DiscoveryOptions say how to find and trust the parent.
type DiscoveryOptions struct {
	ParentURL string
	// Token is the bootstrap token, <id>.<secret>.
	Token string
	// Exactly one of CACertHash (sha256:<hex>) and CABundle is set.
	CACertHash string
	CABundle   []byte
	// Timeout bounds each request (default 30s).
	Timeout time.Duration
}

// Discover establishes trust in the parent and checks that the token
// authenticates there.
//
// With a CA hash, the cluster-info ConfigMap is read without trusting the
// server, its JWS signature for the token proves the parent knows the
// token's secret, and the CA it names must match the pin. Then the server
// is contacted again, trusting only that CA.
func Discover(ctx context.Context, o DiscoveryOptions) (*Parent, error) {
	if o.Timeout == 0 {
		// A parent busy with many joins at once answers slowly: a request
		// given up and made again costs it more than waiting.
		o.Timeout = 30 * time.Second
	}
	if !bootstraputil.IsValidBootstrapToken(o.Token) {
		return nil, Errorf(v1alpha1.ReasonTokenSecretError, nil,
			"the bootstrap token is not of the form <6 chars>.<16 chars> of [a-z0-9]: create one with 'nestctl token create' on the parent and store it under key 'token'")
	}
	tokenID, tokenSecret, _ := strings.Cut(o.Token, ".")

	caData := o.CABundle
	if o.CACertHash != "" {
		var signed map[string]string
		var err error
		if caData, signed, err = discoverCA(ctx, o, tokenID, tokenSecret); err != nil {
			return nil, err
		}
		if signed != nil {
			// What the parent publishes about itself came with the
			// pinned CA, under the signature that proves the token: no
			// second read. The certificate request that follows is made
			// with the token over the pinned CA, and says so if the
			// parent refuses either.
			return &Parent{URL: o.ParentURL, CAData: caData, ClusterName: signed[api.ClusterInfoNameKey], Info: signed}, nil
		}
	} else if len(caData) == 0 {
		return nil, Errorf(v1alpha1.ReasonInvalidSpec, nil, "set caCertHash or caBundle")
	}

	cfg := &rest.Config{Host: o.ParentURL, BearerToken: o.Token, Timeout: o.Timeout,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData}}
	client, done, err := OwnClient(cfg)
	if err != nil {
		return nil, Errorf(v1alpha1.ReasonInvalidSpec, err, "cannot build a client for %s", o.ParentURL)
	}
	defer done()
	// One read, with the token, over a connection that trusts only the
	// parent's CA: it checks both (a token the parent does not know is
	// refused here, 401), and it learns what the parent publishes about
	// itself. The certificate request that follows is made with the same
	// token, so no separate review of the token is needed.
	p := &Parent{URL: o.ParentURL, CAData: caData}
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, api.ClusterInfoConfigMap, metav1.GetOptions{})
	switch {
	case err == nil:
		p.ClusterName = cm.Data[api.ClusterInfoNameKey]
		p.Info = cm.Data
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		// A parent that publishes nothing about itself (or not to
		// bootstrappers).
	default:
		return nil, classify(err, o.ParentURL)
	}
	return p, nil
}

// discoverCA reads cluster-info without trusting the server and returns the
// CA it names once its signature and pin are checked, with the copy of
// nestlet-info the signed kubeconfig carries (nil when it has none).
func discoverCA(ctx context.Context, o DiscoveryOptions, tokenID, tokenSecret string) ([]byte, map[string]string, error) {
	pins := pubkeypin.NewSet()
	if err := pins.Allow(o.CACertHash); err != nil {
		return nil, nil, Errorf(v1alpha1.ReasonInvalidSpec, err, "caCertHash %q is not a sha256:<hex> pin", o.CACertHash)
	}
	insecure := &rest.Config{Host: o.ParentURL, Timeout: o.Timeout, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	client, done, err := OwnClient(insecure)
	if err != nil {
		return nil, nil, Errorf(v1alpha1.ReasonInvalidSpec, err, "cannot build a client for %s", o.ParentURL)
	}
	defer done()
	var kubeconfig string
	for attempt := 0; ; attempt++ {
		cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return nil, nil, Errorf(v1alpha1.ReasonTokenRejected, err,
					"the parent publishes no readable kube-public/cluster-info: run 'nestctl token create' on the parent, which sets it up")
			}
			return nil, nil, classify(err, o.ParentURL)
		}
		var ok bool
		kubeconfig, ok = cm.Data[bootstrapapi.KubeConfigKey]
		if !ok {
			return nil, nil, Errorf(v1alpha1.ReasonTokenRejected, nil, "the parent's cluster-info has no kubeconfig: run 'nestctl token create' on the parent")
		}
		sig, ok := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+tokenID]
		if !ok {
			return nil, nil, Errorf(v1alpha1.ReasonTokenRejected, nil,
				"the parent knows no bootstrap token with id %q (wrong, expired or deleted): create a new one with 'nestctl token create' on the parent and update the token Secret", tokenID)
		}
		if jws.DetachedTokenIsValid(sig, kubeconfig, tokenID, tokenSecret) {
			break
		}
		// Either the secret is wrong, or the kubeconfig has just changed
		// (nestlet-proxy copying its endpoints in) and the parent's
		// bootstrapsigner has not signed it again yet, which takes it
		// milliseconds: look again before saying the secret is wrong.
		if attempt == resignAttempts {
			return nil, nil, Errorf(v1alpha1.ReasonTokenRejected, nil,
				"the secret part of bootstrap token %q does not match the parent's: check the token Secret, or create a new token with 'nestctl token create' (if cluster-info changed just now, the parent's kube-controller-manager, whose bootstrapsigner signs it again, may be down)", tokenID)
		}
		select {
		case <-ctx.Done():
			return nil, nil, classify(ctx.Err(), o.ParentURL)
		case <-time.After(resignWait << attempt):
		}
	}
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil || len(cfg.Clusters) != 1 {
		return nil, nil, Errorf(v1alpha1.ReasonTokenRejected, err, "the parent's cluster-info kubeconfig does not name exactly one cluster")
	}
	var cluster *clientcmdapi.Cluster
	for _, c := range cfg.Clusters {
		cluster = c
	}
	certs, err := certutil.ParseCertsPEM(cluster.CertificateAuthorityData)
	if err != nil {
		return nil, nil, Errorf(v1alpha1.ReasonCAMismatch, err, "the parent's cluster-info holds no valid CA certificate")
	}
	if err := pins.CheckAny(certs); err != nil {
		return nil, nil, Errorf(v1alpha1.ReasonCAMismatch, err,
			"the parent's CA does not match caCertHash %s: check the hash printed by 'nestctl token create' on the parent (a man in the middle would also look like this)", o.CACertHash)
	}
	// A copy that cannot be read is ignored: nestlet-info is read instead.
	info, _ := signedInfo(cluster)
	return cluster.CertificateAuthorityData, info, nil
}

// How long discoverCA waits for the parent to sign a changed cluster-info
// again: 100 ms, doubled, 4 times (1.5 s in all).
const (
	resignWait     = 100 * time.Millisecond
	resignAttempts = 4
)

// signedInfo returns the copy of nestlet-info in a cluster of cluster-info's
// kubeconfig (api.ClusterInfoExtension; nil when there is none).
func signedInfo(c *clientcmdapi.Cluster) (map[string]string, error) {
	ext, ok := c.Extensions[api.ClusterInfoExtension]
	if !ok {
		return nil, nil
	}
	u, ok := ext.(*runtime.Unknown)
	if !ok {
		return nil, fmt.Errorf("extension %s is a %T", api.ClusterInfoExtension, ext)
	}
	var info map[string]string
	if err := json.Unmarshal(u.Raw, &info); err != nil {
		return nil, fmt.Errorf("extension %s: %w", api.ClusterInfoExtension, err)
	}
	if info == nil {
		info = map[string]string{}
	}
	return info, nil
}

// classify maps a transport or API error to a condition reason.
func classify(err error, parentURL string) error {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	var tlsVerify *tls.CertificateVerificationError
	switch {
	case apierrors.IsUnauthorized(err):
		return Errorf(v1alpha1.ReasonTokenRejected, err,
			"the parent refused the bootstrap token (wrong or expired): create a new one with 'nestctl token create' on the parent and update the token Secret")
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &certInvalid), errors.As(err, &tlsVerify):
		return Errorf(v1alpha1.ReasonCAMismatch, err,
			"the parent's serving certificate is not trusted by the configured CA: check caBundle/caCertHash against the parent's CA")
	}
	var netErr net.Error
	var urlErr *url.Error
	var opErr *net.OpError
	if errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.As(err, &opErr) || errors.Is(err, context.DeadlineExceeded) {
		return Errorf(v1alpha1.ReasonParentUnreachable, err,
			"cannot reach the parent at %s: check parentURL and that this cluster can connect to it (it retries with backoff)", parentURL)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return Errorf(v1alpha1.ReasonParentUnreachable, err, "the parent at %s answered with an error", parentURL)
	}
	return Errorf(v1alpha1.ReasonParentUnreachable, err, "cannot talk to the parent at %s", parentURL)
}

// Classify maps an error from a request to the parent to a condition
// reason, for callers outside this package.
func Classify(err error, parentURL string) error { return classify(err, parentURL) }
