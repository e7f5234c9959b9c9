package join

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// connCounter is an HTTP/2 TLS server answering every request with an
// empty ConfigMap, counting the connections opened and closed.
type connCounter struct {
	*httptest.Server
	mu             sync.Mutex
	opened, closed int
}

func newConnCounter(t *testing.T) *connCounter {
	c := &connCounter{}
	c.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cluster-info"}}`))
	}))
	c.EnableHTTP2 = true
	c.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		c.mu.Lock()
		defer c.mu.Unlock()
		switch s {
		case http.StateNew:
			c.opened++
		case http.StateClosed:
			c.closed++
		}
	}
	c.StartTLS()
	t.Cleanup(c.Close)
	return c
}

func (c *connCounter) counts() (opened, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.closed
}

func get(t *testing.T, client kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "cluster-info", metav1.GetOptions{})
	require.NoError(t, err)
}

// Joins from one process to one parent each have their own connection, and
// give it back when done; clients made the usual way share one.
func TestOwnClientHasItsOwnConnection(t *testing.T) {
	srv := newConnCounter(t)
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}

	// The usual way, as a control: the second client reuses the first's
	// connection.
	for range 2 {
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		get(t, client)
	}
	opened, _ := srv.counts()
	require.Equal(t, 1, opened, "clients made with NewForConfig no longer share a connection: OwnClient's reason is gone")

	var dones []func()
	for range 2 {
		client, done, err := OwnClient(cfg)
		require.NoError(t, err)
		dones = append(dones, done)
		get(t, client)
	}
	opened, closed := srv.counts()
	assert.Equal(t, 3, opened, "each OwnClient opens a connection of its own")
	assert.Equal(t, 0, closed)

	for _, done := range dones {
		done()
	}
	assert.Eventually(t, func() bool {
		_, closed := srv.counts()
		return closed == 2
	}, 30*time.Second, 10*time.Millisecond, "done closes the client's idle connection, and only it")
}
