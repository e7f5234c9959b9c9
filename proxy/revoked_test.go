package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hijackable is a ResponseWriter whose connection can be taken over.
type hijackable struct {
	*httptest.ResponseRecorder
	conn net.Conn
}

func (h *hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return h.conn, bufio.NewReadWriter(bufio.NewReader(h.conn), bufio.NewWriter(h.conn)), nil
}

// A revoked child's live tunnel is closed at once, and its new ones are
// refused; another child's stays.
func TestRevokedTunnelsClosedAndRefused(t *testing.T) {
	g := newTunnelGuard(nil)
	open := func(name string) (net.Conn, func()) {
		ours, theirs := net.Pipe()
		w, release := g.track(&hijackable{ResponseRecorder: httptest.NewRecorder(), conn: ours}, name)
		_, _, err := w.(http.Hijacker).Hijack()
		require.NoError(t, err)
		return theirs, release
	}
	east, releaseEast := open("east")
	west, releaseWest := open("west")
	defer releaseWest()
	require.NoError(t, g.admit("east"))

	g.revoked.Set(map[string]string{"east": "2026-11-25T12:00:00Z"})
	_ = east.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := east.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "east's tunnel is closed")
	require.ErrorContains(t, g.admit("east"), `node "east" was revoked`)
	require.NoError(t, g.admit("west"))
	releaseEast()

	// West's tunnel is open: a write reaches the other end.
	go func() { _, _ = west.Write([]byte("x")) }()
	got := make([]byte, 1)
	_, err = io.ReadFull(g.connOf(t, "west"), got)
	require.NoError(t, err)

	g.revoked.Set(nil)
	require.NoError(t, g.admit("east"), "lifted")
}

// connOf is the one tunnel connection held for name.
func (g *tunnelGuard) connOf(t *testing.T, name string) net.Conn {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Len(t, g.conns[name], 1)
	for c := range g.conns[name] {
		return c
	}
	return nil
}
