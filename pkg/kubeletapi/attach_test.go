package kubeletapi

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
)

func TestAttach(t *testing.T) {
	child := &fakeChild{attach: func(in io.Reader, out, errOut io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
		b, err := io.ReadAll(in)
		if err != nil {
			return err
		}
		_, _ = io.WriteString(out, "got "+string(b))
		_, _ = io.WriteString(errOut, "to stderr")
		return nil
	}}
	s := child.start(t)

	attach := &fakeAttach{stdin: strings.NewReader("typed"), stdout: &buffer{}, stderr: &buffer{}}
	require.NoError(t, s.Attach(t.Context(), "parent-ns", "web", "app", attach))
	assert.Equal(t, "got typed", attach.stdout.String())
	assert.Equal(t, "to stderr", attach.stderr.String())

	calls := child.calls()
	require.Len(t, calls, 1)
	got := calls[0]
	assert.Equal(t, [4]string{"child-ns", "parent-ns-web", "attach", "app"}, [4]string{got.Namespace, got.Name, got.Subresource, got.Query.Get("container")})
	assert.Empty(t, got.Query["command"], "attach runs no command")

	t.Run("a pod without a delegate", func(t *testing.T) {
		err := s.Attach(t.Context(), "parent-ns", "unknown", "app", &fakeAttach{stdout: &buffer{}})
		assert.True(t, errdefs.IsNotFound(err), "IsNotFound(%v)", err)
	})
}
