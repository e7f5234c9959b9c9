package peers

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nestlet/nestlet/api"
	"github.com/nestlet/nestlet/provider/peers/peerstest"
)

func TestParseAPIAddress(t *testing.T) {
	for in, want := range map[string]string{"10.251.0.2": "10.251.0.2:443", "10.251.0.2:6443": "10.251.0.2:6443",
		"fd00::1": "[fd00::1]:443", "[fd00::1]:8443": "[fd00::1]:8443"} {
		got, err := ParseAPIAddress(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got.String(), in)
	}
	for _, bad := range []string{"api.example.org", "10.251.0.2:", "10.251.0.0/16"} {
		_, err := ParseAPIAddress(bad)
		require.ErrorContains(t, err, "want an IP or IP:port", bad)
	}
}

func TestAPIUpstream(t *testing.T) {
	for in, want := range map[string]string{"https://10.250.0.2:6443": "10.250.0.2:6443", "https://api.example.org": "api.example.org:443",
		"http://127.0.0.1": "127.0.0.1:80", "10.96.0.1:443": "10.96.0.1:443", "https://[fd00::1]:6443/": "[fd00::1]:6443"} {
		got, err := apiUpstream(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

// The relay copies bytes both ways and passes a half-close on (a client
// that has sent everything still reads the answer); closing it ends the
// connections it holds.
func TestAPIRelay(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = up.Close() }()
	// heard is closed once the upstream has read "watch": the relay has
	// then read all the client sent, and closing it ends the connection
	// with a FIN (closing a socket with unread bytes sends a reset).
	heard := make(chan struct{})
	var once sync.Once
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				var b []byte
				buf := make([]byte, 512)
				for { // until the client's half-close
					n, err := c.Read(buf)
					b = append(b, buf[:n]...)
					if string(b) == "watch" {
						once.Do(func() { close(heard) })
					}
					if err != nil {
						break
					}
				}
				_, _ = c.Write(append([]byte("echo "), b...))
			}()
		}
	}()
	r, err := relayAPI(netip.MustParseAddrPort("127.0.0.1:0"), up.Addr().String())
	require.NoError(t, err)
	relayed := r.ln.Addr().String()

	c, err := net.Dial("tcp", relayed)
	require.NoError(t, err)
	_, err = c.Write([]byte("GET /version"))
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, "echo GET /version", string(got))
	_ = c.Close()

	// A connection held open (the upstream waits for more) ends with the
	// relay.
	held, err := net.Dial("tcp", relayed)
	require.NoError(t, err)
	_, err = held.Write([]byte("watch"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.open) == 2
	}, 10*time.Second, 10*time.Millisecond, "the relay holds the connection and its upstream")
	select {
	case <-heard:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never received what the held connection sent")
	}
	r.close()
	require.NoError(t, held.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = bufio.NewReader(held).ReadByte()
	require.ErrorIs(t, err, io.EOF, "closed by the relay, not by the deadline")
	_, err = net.Dial("tcp", relayed)
	require.Error(t, err, "nothing listens after close")
}

// A cluster with an API address carries it to its children as one of its
// routes and tells them where its API server is; a child reads it from its
// virtual node and routes it to that parent.
func TestPeersCarryTheAPIAddress(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, indexer.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.1.0.0/24"}}}))
	gw := peerstest.NewGateway()
	parent := New(gw, "10.250.0.2:51820", 0, corelisters.NewNodeLister(indexer))
	parent.apiAddr = netip.MustParseAddrPort("10.251.0.2:443")
	parent.refresh(t.Context())
	var gp api.GatewayParent
	require.NoError(t, json.Unmarshal([]byte(parent.ParentAnnotation("child")), &gp))
	require.Equal(t, "10.251.0.2:443", gp.APIAddress)
	require.Equal(t, []string{"10.1.0.0/24", "10.251.0.2/32"}, gp.Routes)

	peer, err := parentPeer(&gp, []string{"10.2.0.0/24"}, 0)
	require.NoError(t, err)
	require.Equal(t, peerstest.Prefixes("10.1.0.0/24", "10.251.0.2/32"), peer.AllowedIPs, "the child routes the address to its parent")

	clk := clocktesting.NewFakeClock(time.Now())
	relay := NewParentRelay(clk)
	addr, known := relay.Get()
	require.Empty(t, addr)
	require.False(t, known, "nothing before the node is read")
	decorated := map[string]string{api.AnnotationParentVersion: "v1", api.AnnotationGatewayKey: "k"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Annotations: map[string]string{
		api.AnnotationGatewayParent: parent.ParentAnnotation("child")}}}
	maps.Copy(node.Annotations, decorated)
	relay.Set(node)
	addr, known = relay.Get()
	require.Equal(t, "10.251.0.2:443", addr)
	require.True(t, known)
	relay.Set(nil)
	addr, _ = relay.Get()
	require.Equal(t, "10.251.0.2:443", addr, "no node read: unchanged")
	relay.Set(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Annotations: maps.Clone(decorated)}})
	addr, known = relay.Get()
	require.Empty(t, addr, "the parent no longer offers one")
	require.True(t, known, "the parent said so")

	// Not said yet: a node the parent's agent has not decorated, or
	// decorated before it carried this gateway's key.
	for name, annotations := range map[string]map[string]string{
		"not decorated":         {api.AnnotationGatewayKey: "k"},
		"decorated without key": {api.AnnotationParentVersion: "v1"},
	} {
		relay := NewParentRelay(clk)
		relay.Set(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "child", Annotations: annotations}})
		_, known := relay.Get()
		require.False(t, known, name)
		clk.Step(relayWait)
		addr, known := relay.Get()
		require.True(t, known, "%s: a parent that never says gets the URL after relayWait", name)
		require.Empty(t, addr)
	}
}

// A client holds at most its share of the relay's connections at once: one
// more is closed at once, and is admitted again once one of its others
// ends.
func TestAPIRelayBoundsAClient(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = up.Close() }()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }() // echo, until the client is done
		}
	}()
	r, err := relayAPI(netip.MustParseAddrPort("127.0.0.1:0"), up.Addr().String())
	require.NoError(t, err)
	defer r.close()
	r.perClient = 2
	dial := func() net.Conn {
		c, err := net.Dial("tcp", r.ln.Addr().String())
		require.NoError(t, err)
		return c
	}
	echoes := func(c net.Conn) bool {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			return false
		}
		_, err := io.ReadFull(c, make([]byte, 1))
		return err == nil
	}
	first, second := dial(), dial()
	require.True(t, echoes(first))
	require.True(t, echoes(second))
	third := dial()
	require.False(t, echoes(third), "a third connection of the same client is closed")
	_ = first.Close()
	require.Eventually(t, func() bool {
		c := dial()
		defer func() { _ = c.Close() }()
		return echoes(c)
	}, 5*time.Second, 50*time.Millisecond, "admitted again once one of its others ended")
	_ = second.Close()
	_ = third.Close()
}
