package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/test/framework"
)

// TestTwoClusters starts two clusters at once and checks what every later
// feature relies on: kwok nodes run pods, bootstrap tokens authenticate, the
// kubelet-client CSR signer issues certificates, and nothing is left running
// once the environment is stopped.
func TestTwoClusters(t *testing.T) {
	env := framework.StartForTest(t, launcher.Spec{Clusters: []launcher.ClusterOptions{
		{Name: "alpha", Nodes: []launcher.NodeOptions{{Name: "alpha-node", Labels: map[string]string{"topology.kubernetes.io/region": "east"}}}},
		{Name: "beta", Nodes: []launcher.NodeOptions{{Name: "beta-node", Labels: map[string]string{"topology.kubernetes.io/region": "west"}}}},
	}})
	clusters := env.Clusters()
	require.Len(t, clusters, 2)

	var wg sync.WaitGroup
	for _, c := range clusters {
		wg.Go(func() {
			t.Run("pod runs on kwok node/"+c.Name, func(t *testing.T) { podRuns(t, c) })
			t.Run("bootstrap token and CSR signer/"+c.Name, func(t *testing.T) { bootstrapAndSign(t, c) })
		})
	}
	wg.Wait()

	procs := env.Processes()
	require.GreaterOrEqual(t, len(procs), 9, "etcd plus four processes per cluster")
	env.Stop()
	for _, p := range procs {
		require.Falsef(t, p.Alive(), "process %s (pid %d) still running after Stop", p.Name, p.PID())
	}
}

func podRuns(t *testing.T, c *launcher.Cluster) {
	ctx := t.Context()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
		},
	}
	_, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var got *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == corev1.PodRunning, nil
	})
	require.NoErrorf(t, err, "pod not Running: %+v", got.Status)
	require.Equal(t, c.Name+"-node", got.Spec.NodeName)
}

func bootstrapAndSign(t *testing.T, c *launcher.Cluster) {
	ctx := t.Context()
	const tokenID, tokenSecret = "abcdef", "0123456789abcdef"
	_, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + tokenID, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id":                       tokenID,
			"token-secret":                   tokenSecret,
			"usage-bootstrap-authentication": "true",
			"expiration":                     time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-bootstrappers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrappers"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	withToken := func(token string) kubernetes.Interface {
		cfg := c.Anonymous()
		cfg.BearerToken = token
		return kubernetes.NewForConfigOrDie(cfg)
	}

	// A wrong token is refused by authentication.
	_, err = withToken(tokenID+".ffffffffffffffff").CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.Truef(t, apierrors.IsUnauthorized(err), "wrong token: want 401, got %v", err)

	// The right one may create a CSR (RBAC for system:bootstrappers)...
	bootstrap := withToken(tokenID + "." + tokenSecret)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	nodeName := "system:node:" + c.Name + "-child"
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: nodeName, Organization: []string{"system:nodes"}},
	}, key)
	require.NoError(t, err)
	var err2 error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		// The bootstrap token Secret is read through the API server's
		// informer, so the first attempt may race it.
		_, err2 = bootstrap.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "test-csr"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER}),
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		}, metav1.CreateOptions{})
		return err2 == nil || apierrors.IsAlreadyExists(err2), nil
	})
	require.NoErrorf(t, err, "creating CSR with the bootstrap token: %v", err2)

	// ...and once approved, the controller manager's signer issues it.
	csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, "test-csr", metav1.GetOptions{})
	require.NoError(t, err)
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test",
	})
	_, err = c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	var issued []byte
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, "test-csr", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		issued = csr.Status.Certificate
		return len(issued) > 0, nil
	})
	require.NoError(t, err, "certificate never issued")
	certs, err := certutil.ParseCertsPEM(issued)
	require.NoError(t, err)
	require.Equal(t, nodeName, certs[0].Subject.CommonName)

	// The issued certificate authenticates as that node.
	nodeCfg := c.Anonymous()
	nodeCfg.CertData = issued
	nodeCfg.KeyData = mustMarshalKey(t, key)
	review, err := kubernetes.NewForConfigOrDie(nodeCfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, nodeName, review.Status.UserInfo.Username)
}

func mustMarshalKey(t *testing.T, key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
