package kubeletapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

func TestSizeQueue(t *testing.T) {
	tests := []struct {
		name   string
		sent   []api.TermSize
		close  bool // close the channel after sending
		cancel bool // cancel the context after sending
		want   []*remotecommand.TerminalSize
	}{
		{
			name:  "sizes in order, then nil on close",
			sent:  []api.TermSize{{Width: 80, Height: 24}, {Width: 120, Height: 40}},
			close: true,
			want:  []*remotecommand.TerminalSize{{Width: 80, Height: 24}, {Width: 120, Height: 40}, nil},
		},
		{
			name:  "nil at once on a closed channel",
			close: true,
			want:  []*remotecommand.TerminalSize{nil},
		},
		{
			name:   "nil once the context ends, the channel still open",
			cancel: true,
			want:   []*remotecommand.TerminalSize{nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ch := make(chan api.TermSize, len(tt.sent))
			for _, s := range tt.sent {
				ch <- s
			}
			if tt.close {
				close(ch)
			}
			if tt.cancel {
				cancel()
			}
			q := sizeQueue{ctx: ctx, ch: ch}
			var got []*remotecommand.TerminalSize
			for range tt.want {
				got = append(got, q.Next())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Next() (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("Next blocks until a resize arrives", func(t *testing.T) {
		ch := make(chan api.TermSize)
		q := sizeQueue{ctx: t.Context(), ch: ch}
		got := make(chan *remotecommand.TerminalSize, 1)
		go func() { got <- q.Next() }()
		ch <- api.TermSize{Width: 100, Height: 30} // unbuffered: Next is receiving
		assert.Equal(t, &remotecommand.TerminalSize{Width: 100, Height: 30}, <-got)
	})
}

func TestExec(t *testing.T) {
	// echo writes its command and stdin to stdout, "warning" to stderr.
	echo := func(cmd []string, in io.Reader, out, errOut io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
		input := ""
		if in != nil {
			b, err := io.ReadAll(in)
			if err != nil {
				return err
			}
			input = string(b)
		}
		_, _ = fmt.Fprintf(out, "%s<%s>", strings.Join(cmd, " "), input)
		if errOut != nil {
			_, _ = io.WriteString(errOut, "warning")
		}
		return nil
	}
	tests := []struct {
		name         string
		child        *fakeChild
		pod          string
		stdin        string // "": no stdin
		noStderr     bool
		wantStdout   string
		wantStderr   string
		wantExitCode int    // for an exit error
		wantErr      string // the whole message of any other error
		wantNotFound bool
		// wantStreams are the streams asked of the child (stdin, stdout, stderr).
		wantStreams [3]string
	}{
		{
			name:        "streams wired both ways",
			child:       &fakeChild{exec: echo},
			stdin:       "input",
			wantStdout:  "sh -c date<input>",
			wantStderr:  "warning",
			wantStreams: [3]string{"true", "true", "true"},
		},
		{
			name:        "only the streams the caller has",
			child:       &fakeChild{exec: echo},
			noStderr:    true,
			wantStdout:  "sh -c date<>",
			wantStreams: [3]string{"", "true", ""},
		},
		{
			name:        "SPDY when the child refuses WebSockets",
			child:       &fakeChild{exec: echo, noWebSockets: true},
			stdin:       "input",
			wantStdout:  "sh -c date<input>",
			wantStderr:  "warning",
			wantStreams: [3]string{"true", "true", "true"},
		},
		{
			name: "an exit code stays an exit code",
			child: &fakeChild{exec: func([]string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommand.TerminalSize) error {
				return utilexec.CodeExitError{Err: errors.New("exit status 3"), Code: 3}
			}},
			wantExitCode: 3,
			wantStreams:  [3]string{"", "true", "true"},
		},
		{
			name: "any other failure keeps the leaf's words",
			child: &fakeChild{exec: func([]string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommand.TerminalSize) error {
				return errors.New(`failed to exec in container: exec: "date": executable file not found in $PATH`)
			}},
			wantErr:     `failed to exec in container: exec: "date": executable file not found in $PATH`,
			wantStreams: [3]string{"", "true", "true"},
		},
		{
			name:         "a pod without a delegate",
			child:        &fakeChild{exec: echo},
			pod:          "unknown",
			wantNotFound: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.child.start(t)
			attach := &fakeAttach{stdout: &buffer{}}
			if !tt.noStderr {
				attach.stderr = &buffer{}
			}
			if tt.stdin != "" {
				attach.stdin = strings.NewReader(tt.stdin)
			}
			podName := tt.pod
			if podName == "" {
				podName = "web"
			}
			err := s.Exec(t.Context(), "parent-ns", podName, "app", []string{"sh", "-c", "date"}, attach)

			switch {
			case tt.wantNotFound:
				require.Error(t, err)
				assert.True(t, errdefs.IsNotFound(err), "IsNotFound(%v)", err)
				assert.Empty(t, tt.child.calls())
				return
			case tt.wantExitCode != 0:
				var exitErr interface{ ExitStatus() int }
				require.ErrorAs(t, err, &exitErr)
				assert.Equal(t, tt.wantExitCode, exitErr.ExitStatus())
			case tt.wantErr != "":
				require.EqualError(t, err, tt.wantErr)
			default:
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantStdout, attach.stdout.String())
			if attach.stderr != nil {
				assert.Equal(t, tt.wantStderr, attach.stderr.String())
			}

			calls := tt.child.calls()
			require.NotEmpty(t, calls)
			last := calls[len(calls)-1]
			assert.Equal(t, "child-ns", last.Namespace)
			assert.Equal(t, "parent-ns-web", last.Name)
			assert.Equal(t, "exec", last.Subresource)
			assert.Equal(t, "app", last.Query.Get("container"))
			assert.Equal(t, []string{"sh", "-c", "date"}, last.Query["command"])
			assert.Equal(t, tt.wantStreams, [3]string{last.Query.Get("stdin"), last.Query.Get("stdout"), last.Query.Get("stderr")})
			assert.True(t, calls[0].WebSocket, "WebSocket first")
			if tt.child.noWebSockets {
				require.Len(t, calls, 2)
				assert.False(t, last.WebSocket, "then SPDY")
			} else {
				assert.Len(t, calls, 1, "no SPDY retry after a WebSocket session")
			}
		})
	}
}

func TestExecTTYResizes(t *testing.T) {
	child := &fakeChild{exec: func(_ []string, _ io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
		if !tty || errOut != nil {
			return fmt.Errorf("tty=%t stderr=%t: want a terminal without stderr", tty, errOut != nil)
		}
		// Report the first two sizes.
		for range 2 {
			size, ok := <-resize
			if !ok {
				return errors.New("resize channel closed")
			}
			_, _ = fmt.Fprintf(out, "%dx%d;", size.Width, size.Height)
		}
		return nil
	}}
	s := child.start(t)
	attach := &fakeAttach{stdout: &buffer{}, tty: true, resize: make(chan api.TermSize, 2)}
	attach.resize <- api.TermSize{Width: 80, Height: 24}
	attach.resize <- api.TermSize{Width: 120, Height: 40}
	require.NoError(t, s.Exec(t.Context(), "parent-ns", "web", "app", []string{"sh"}, attach))
	assert.Equal(t, "80x24;120x40;", attach.stdout.String())
	calls := child.calls()
	require.NotEmpty(t, calls)
	assert.Equal(t, "true", calls[len(calls)-1].Query.Get("tty"))
}
