package child

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nestlet/nestlet/api/v1alpha1"
	"github.com/nestlet/nestlet/provider/join"
)

// The token and identities of the agent's namespace come from the watch
// once it has listed the namespace: no read of the Secret per join.
func TestOwnSecretsReadFromTheWatch(t *testing.T) {
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tok", Namespace: "nestlet-system"}, Data: map[string][]byte{"token": []byte("abcdef.0123456789abcdef")}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tok", Namespace: "elsewhere"}}
	client := fake.NewClientset(token, other)
	s := newOwnSecrets(client, "nestlet-system")
	require.Nil(t, s.get("nestlet-system", "tok"), "nothing before the watch has listed the namespace")

	ctx := t.Context()
	go s.run(ctx)
	require.Eventually(t, s.informer.HasSynced, 10*time.Second, 10*time.Millisecond)
	got := s.get("nestlet-system", "tok")
	require.NotNil(t, got)
	require.Equal(t, "abcdef.0123456789abcdef", string(got.Data["token"]))
	got.Data["token"] = []byte("changed")
	require.Equal(t, "abcdef.0123456789abcdef", string(s.get("nestlet-system", "tok").Data["token"]), "callers get a copy")
	require.Nil(t, s.get("elsewhere", "tok"), "another namespace is read from the API server")
	require.Nil(t, s.get("nestlet-system", "missing"))

	// A rotated token is seen.
	token.Data["token"] = []byte("ghijkl.0123456789abcdef")
	_, err := client.CoreV1().Secrets("nestlet-system").Update(ctx, token, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return string(s.get("nestlet-system", "tok").Data["token"]) == "ghijkl.0123456789abcdef" }, 10*time.Second, 10*time.Millisecond)

	for _, a := range client.Actions() {
		if a.GetResource().Resource == "secrets" {
			_, isGet := a.(k8stesting.GetAction)
			require.False(t, isGet, "no Secret was read one by one: %v", a)
		}
	}

	var nilSecrets *ownSecrets
	require.Nil(t, nilSecrets.get("nestlet-system", "tok"), "an agent not running has no watch")
}

// A Target whose token Secret is in another namespace is refused with a
// condition that says where to put it; the Secret is not read.
func TestTokenOutsideTheAgentsNamespace(t *testing.T) {
	client := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tok", Namespace: "elsewhere"},
		Data: map[string][]byte{"token": []byte("abcdef.0123456789abcdef")}})
	tg := &v1alpha1.Target{Spec: v1alpha1.TargetSpec{BootstrapTokenSecretRef: v1alpha1.SecretReference{Namespace: "elsewhere", Name: "tok"}}}
	j := &joiner{target: tg, client: client, store: &join.Store{Client: client, Namespace: "nestlet-system"}}
	_, err := j.token(t.Context())
	require.ErrorContains(t, err, "outside the agent's namespace nestlet-system")
	var jerr *join.Error
	require.ErrorAs(t, err, &jerr)
	require.Equal(t, v1alpha1.ReasonTokenSecretError, jerr.Reason)
	require.Empty(t, client.Actions(), "nothing read")
}
