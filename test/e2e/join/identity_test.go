package join

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nestlet/nestlet/provider/join"
)

// A bootstrap token admits the child it was made for and no other: the
// root's agent approves a request for that name and denies one for
// another (auto-approval); `nestctl approve` does the same (manual); a
// token made for no child cannot take a live child's name.
func TestTokenBoundToItsChild(t *testing.T) {
	ctx := t.Context()
	root := env.Cluster("root")
	newToken := func(args ...string) kubernetes.Interface {
		t.Helper()
		out, err := root.Nestctl(ctx, append([]string{"token", "create", "--cluster-name=root"}, args...)...)
		require.NoError(t, err)
		m := tokenOf.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		cfg := rest.AnonymousClientConfig(root.Config)
		cfg.BearerToken = m[1]
		return kubernetes.NewForConfigOrDie(cfg)
	}
	// request files a node certificate request for name and waits until
	// it is decided, or pending when wait ends first.
	request := func(client kubernetes.Interface, name string, wait time.Duration, filed func(string)) ([]byte, error) {
		t.Helper()
		key, err := join.NewKey()
		require.NoError(t, err)
		rctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		return join.RequestNodeCertificate(rctx, client, name, key, filed)
	}

	auto := newToken("--child-name=bound-a", "--auto-approve")
	_, err := request(auto, "bound-b", time.Minute, nil)
	require.ErrorContains(t, err, `was made for child "bound-a"; this request asks for node "bound-b"`, "another child's name with an auto-approved token")
	cert, err := request(auto, "bound-a", time.Minute, nil)
	require.NoError(t, err, "the name the token was made for")
	require.NotEmpty(t, cert)

	manual := newToken("--child-name=bound-c")
	for _, c := range []struct{ name, approveErr string }{
		{"bound-d", `made for child "bound-c"; this request asks for node "bound-d"`},
		{"bound-c", ""},
	} {
		filed := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			_, err := request(manual, c.name, time.Minute, func(csr string) { filed <- csr })
			done <- err
		}()
		select {
		case <-filed:
		case err := <-done:
			require.FailNow(t, "decided before nestctl approve", "%s: %v", c.name, err)
		}
		out, err := root.Nestctl(ctx, "approve", c.name)
		if c.approveErr != "" {
			require.ErrorContains(t, err, c.approveErr, "nestctl approve %s: %s", c.name, out)
			require.ErrorContains(t, <-done, "denied")
			continue
		}
		require.NoError(t, err, out)
		require.NoError(t, <-done, "%s approved with nestctl approve", c.name)
	}

	anyone := newToken("--auto-approve")
	_, err = request(anyone, "east", time.Minute, nil)
	require.ErrorContains(t, err, "cannot take a node's name", "a token made for no child asks for a live child's name")
}
