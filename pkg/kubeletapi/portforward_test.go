package kubeletapi

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
)

// callerStream is the caller's connection: it sends in, then half-closes,
// and collects what comes back.
type callerStream struct {
	in io.Reader

	mu     sync.Mutex
	out    bytes.Buffer
	closed bool
}

func (c *callerStream) Read(p []byte) (int, error) { return c.in.Read(p) }

func (c *callerStream) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *callerStream) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *callerStream) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String(), c.closed
}

func TestPortForward(t *testing.T) {
	// echo answers what it reads, upper-cased, on port 8080 only.
	echo := func(port int32, stream io.ReadWriteCloser) error {
		if port != 8080 {
			return errors.New("nothing listens on that port")
		}
		b, err := io.ReadAll(stream)
		if err != nil {
			return err
		}
		_, err = stream.Write([]byte(strings.ToUpper(string(b))))
		return err
	}
	tests := []struct {
		name         string
		pod          string
		port         int32
		want         string
		wantErr      string // a substring of the error
		wantNotFound bool
	}{
		{name: "data both ways", pod: "web", port: 8080, want: "HELLO THROUGH THE LEVELS"},
		{name: "the child's error for the port", pod: "web", port: 9999, wantErr: "nothing listens on that port"},
		{name: "a pod without a delegate", pod: "unknown", port: 8080, wantNotFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child := &fakeChild{forward: echo}
			s := child.start(t)
			stream := &callerStream{in: strings.NewReader("hello through the levels")}
			err := s.PortForward(t.Context(), "parent-ns", tt.pod, tt.port, stream)
			got, closed := stream.result()
			assert.True(t, closed, "the caller's stream is closed")
			switch {
			case tt.wantNotFound:
				require.Error(t, err)
				assert.True(t, errdefs.IsNotFound(err), "IsNotFound(%v)", err)
				assert.Empty(t, child.calls())
				return
			case tt.wantErr != "":
				require.Error(t, err, "the child's error is not lost")
				// The child resets the data stream as it fails: when that
				// beats the data stream's creation, its reason is not
				// read (kubectl does not read it either).
				if !strings.HasPrefix(err.Error(), "creating the data stream: ") {
					assert.Contains(t, err.Error(), tt.wantErr)
				}
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
			calls := child.calls()
			require.Len(t, calls, 1)
			assert.Equal(t, [3]string{"child-ns", "parent-ns-web", "portforward"}, [3]string{calls[0].Namespace, calls[0].Name, calls[0].Subresource})
		})
	}
}
