package join

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/launcher"
	"github.com/nestlet/nestlet/proxy/bootstrap"
	"github.com/nestlet/nestlet/test/framework"
)

// Each bad input ends in a Target condition naming what is wrong, and
// leaves no node in the parent.
func TestBadInputs(t *testing.T) {
	good := getTarget(t, "west", targetOf["west"]) // joined west -> root
	goodToken := string(must(env.Cluster("west").Client.CoreV1().Secrets(good.Spec.BootstrapTokenSecretRef.Namespace).
		Get(t.Context(), good.Spec.BootstrapTokenSecretRef.Name, metav1.GetOptions{})).Data["token"])
	tokenID, _, _ := strings.Cut(goodToken, ".")

	out, err := env.Cluster("root").Nestctl(t.Context(), "token", "create", "--cluster-name=root", "--child-name=east", "--auto-approve")
	require.NoError(t, err)
	eastToken := tokenOf.FindStringSubmatch(out)[1]

	expired, err := bootstrap.CreateToken(t.Context(), env.Cluster("root").Client, time.Second, "expires at once", bootstrap.TokenFor{})
	require.NoError(t, err)
	// Wait until the parent has dropped it (token cleaner).
	expiredID, _, _ := strings.Cut(expired, ".")
	framework.Eventually(t, time.Minute, "the expired token cleaned up", func(ctx context.Context) (bool, string) {
		_, err := env.Cluster("root").Client.CoreV1().Secrets("kube-system").Get(ctx, bootstraputil.BootstrapTokenSecretName(expiredID), metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	secrets := 0
	spec := func(cluster, secret string, mutate func(*v1alpha1.TargetSpec)) v1alpha1.TargetSpec {
		s := *good.Spec.DeepCopy()
		s.ClusterName = cluster
		if secret != "" {
			secrets++
			s.BootstrapTokenSecretRef = tokenSecret(t, "west", fmt.Sprintf("bad-%s-%d", cluster, secrets), secret)
		}
		if mutate != nil {
			mutate(&s)
		}
		return s
	}
	tests := []struct {
		name    string
		cluster string // where the Target is created
		spec    v1alpha1.TargetSpec
		reason  string
		message string // a fragment of the condition message
	}{
		{name: "unknown token", cluster: "west", spec: spec("bad-unknown-token", "zzzzzz.0123456789abcdef", nil),
			reason: v1alpha1.ReasonTokenRejected, message: "nestctl token create"},
		{name: "wrong token secret", cluster: "west", spec: spec("bad-wrong-secret", tokenID+".0000000000000000", nil),
			reason: v1alpha1.ReasonTokenRejected, message: "does not match"},
		{name: "expired token", cluster: "west", spec: spec("bad-expired", expired, nil),
			reason: v1alpha1.ReasonTokenRejected, message: "expired"},
		{name: "malformed token", cluster: "west", spec: spec("bad-malformed", "not-a-token", nil),
			reason: v1alpha1.ReasonTokenSecretError, message: "<6 chars>.<16 chars>"},
		{name: "missing token secret", cluster: "west", spec: spec("bad-no-secret", "", func(s *v1alpha1.TargetSpec) {
			s.BootstrapTokenSecretRef.Name = "does-not-exist"
		}), reason: v1alpha1.ReasonTokenSecretError, message: "does-not-exist"},
		{name: "unreachable parent", cluster: "west", spec: spec("bad-unreachable", goodToken, func(s *v1alpha1.TargetSpec) {
			s.ParentURL = "https://127.0.0.1:1"
		}), reason: v1alpha1.ReasonParentUnreachable, message: "cannot reach the parent"},
		{name: "CA hash mismatch", cluster: "west", spec: spec("bad-ca", goodToken, func(s *v1alpha1.TargetSpec) {
			s.CACertHash = "sha256:" + strings.Repeat("0", 64)
		}), reason: v1alpha1.ReasonCAMismatch, message: "does not match caCertHash"},
		{name: "label a node may not set", cluster: "west", spec: spec("bad-label", goodToken, func(s *v1alpha1.TargetSpec) {
			s.Labels = map[string]string{"node-role.kubernetes.io/master": ""}
		}), reason: v1alpha1.ReasonInvalidSpec, message: "NodeRestriction"},
		{name: "token of another child", cluster: "west", spec: spec("east", goodToken, nil),
			reason: v1alpha1.ReasonCSRDenied, message: `was made for child "west"; this request asks for node "east"`},
		// With a token made for east (leaked to west, say), the parent
		// approves, and west's agent finds the node is another cluster's.
		{name: "name of another clusters node", cluster: "west", spec: spec("east", eastToken, nil),
			reason: v1alpha1.ReasonNameTaken, message: "not this cluster's"},
		{name: "own cluster as parent", cluster: "root", spec: func() v1alpha1.TargetSpec {
			s := *good.Spec.DeepCopy()
			s.ClusterName = "bad-self"
			s.ParentURL = env.Cluster("root").URL
			return s
		}(), reason: v1alpha1.ReasonSelfTarget, message: "its own parent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "bad-" + strings.ReplaceAll(strings.ToLower(tt.name), " ", "-")
			createTarget(t, tt.cluster, &v1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tt.spec})
			tg := waitReason(t, tt.cluster, name, tt.reason)
			ready := launcher.TargetCondition(tg, v1alpha1.ConditionReady)
			require.Equal(t, metav1.ConditionFalse, ready.Status)
			require.Contains(t, ready.Message, tt.message)
			if tt.spec.ClusterName != "east" { // east's own node stays
				requireNoNode(t, "root", tt.spec.ClusterName)
			}
		})
	}
	// The node that was not taken over is still there, and still east's.
	n := waitNode(t, "root", "east", 10*time.Second, func(*corev1.Node) bool { return true })
	require.Equal(t, "east", n.Labels["nestlet.io/cluster"])
}

// Malformed Targets are refused by the API server (CRD validation).
func TestMalformedTargetsRejected(t *testing.T) {
	base := getTarget(t, "west", targetOf["west"]).Spec
	tests := []struct {
		name   string
		mutate func(*v1alpha1.TargetSpec)
	}{
		{"plain http parent", func(s *v1alpha1.TargetSpec) { s.ParentURL = "http://127.0.0.1:6443" }},
		{"cluster name with capitals", func(s *v1alpha1.TargetSpec) { s.ClusterName = "Bad_Name" }},
		{"both CA hash and bundle", func(s *v1alpha1.TargetSpec) { s.CABundle = []byte("x") }},
		{"neither CA hash nor bundle", func(s *v1alpha1.TargetSpec) { s.CACertHash = "" }},
		{"CA hash not sha256", func(s *v1alpha1.TargetSpec) { s.CACertHash = "md5:abc" }},
		{"report frequency too small", func(s *v1alpha1.TargetSpec) { s.ReportFrequency = metav1.Duration{Duration: 100 * time.Millisecond} }},
		{"empty token secret name", func(s *v1alpha1.TargetSpec) { s.BootstrapTokenSecretRef.Name = "" }},
		{"cluster name of 64 characters", func(s *v1alpha1.TargetSpec) { s.ClusterName = strings.Repeat("a", 64) }},
		{"CA bundle that is not PEM", func(s *v1alpha1.TargetSpec) { s.CACertHash, s.CABundle = "", []byte("not a certificate") }},
		{"CA bundle with a private key", func(s *v1alpha1.TargetSpec) {
			s.CACertHash, s.CABundle = "", append(must(os.ReadFile(env.Cluster("root").CAPath)), []byte("-----BEGIN EC PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----\n")...)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := *base.DeepCopy()
			tt.mutate(&s)
			_, err := targets(t, "west").Create(t.Context(), &v1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: "malformed"}, Spec: s}, metav1.CreateOptions{})
			require.Truef(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
		})
	}
	// Control: the parent's CA certificate as the bundle passes (dry run).
	s := *base.DeepCopy()
	s.CACertHash, s.CABundle = "", must(os.ReadFile(env.Cluster("root").CAPath))
	_, err := targets(t, "west").Create(t.Context(), &v1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Name: "well-formed"}, Spec: s},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "a PEM CA bundle")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
