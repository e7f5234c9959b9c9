package proxy

import (
	"bufio"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	testclock "k8s.io/utils/clock/testing"
)

// hijackable is a ResponseWriter whose connection can be taken over.
type hijackable struct {
	*httptest.ResponseRecorder
	conn net.Conn
}

func (h *hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return h.conn, bufio.NewReadWriter(bufio.NewReader(h.conn), bufio.NewWriter(h.conn)), nil
}

var guardNow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// nodeCert is a certificate of node name with serial, valid for life.
func nodeCert(name string, serial int64, life time.Duration) *x509.Certificate {
	return &x509.Certificate{
		Subject:      pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		SerialNumber: big.NewInt(serial),
		NotBefore:    guardNow.Add(-time.Minute),
		NotAfter:     guardNow.Add(life),
	}
}

// open takes a tunnel of name with cert through g as serveTunnel does,
// returning the far end of its connection (the child's side) and release.
func open(t *testing.T, g *tunnelGuard, name string, cert *x509.Certificate) (net.Conn, func()) {
	t.Helper()
	ours, theirs := net.Pipe()
	w, release := g.track(&hijackable{ResponseRecorder: httptest.NewRecorder(), conn: ours}, name, cert)
	_, _, err := w.(http.Hijacker).Hijack()
	require.NoError(t, err)
	return theirs, release
}

// requireClosed fails unless the child's end of a tunnel reads EOF.
func requireClosed(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, msg)
}

// requireOpen fails unless a write at the child's end of a tunnel reaches
// the connection the guard holds for name.
func requireOpen(t *testing.T, g *tunnelGuard, name string, c net.Conn) {
	t.Helper()
	go func() { _, _ = c.Write([]byte("x")) }()
	_, err := io.ReadFull(g.connOf(t, name), make([]byte, 1))
	require.NoError(t, err, "the tunnel of %s is open", name)
}

// No tunnel is admitted before the revocations are read.
func TestNoTunnelBeforeTheRevocationsAreRead(t *testing.T) {
	g := newTunnelGuard(fake.NewClientset(), testclock.NewFakeClock(guardNow))
	require.ErrorContains(t, g.admit("east", nodeCert("east", 1, time.Hour)), "not read yet")
}

// A revoked child's live tunnel is closed at once, and its new ones are
// refused; another child's stays.
func TestRevokedTunnelsClosedAndRefused(t *testing.T) {
	g := newTunnelGuard(nil, testclock.NewFakeClock(guardNow))
	eastCert, westCert := nodeCert("east", 1, time.Hour), nodeCert("west", 2, time.Hour)
	east, releaseEast := open(t, g, "east", eastCert)
	west, releaseWest := open(t, g, "west", westCert)
	defer releaseWest()
	require.NoError(t, g.admit("east", eastCert))

	g.revoked.Set(map[string]string{"east": "2026-11-25T12:00:00Z"})
	requireClosed(t, east, "east's tunnel is closed")
	require.ErrorContains(t, g.admit("east", eastCert), `node "east" was revoked`)
	require.NoError(t, g.admit("west", westCert))
	releaseEast()
	requireOpen(t, g, "west", west)

	// One that was admitted before the revocation and hijacked after it
	// is closed at the hijack.
	late, _ := open(t, g, "east", eastCert)
	requireClosed(t, late, "a tunnel taken over after the revocation is closed")

	g.revoked.Set(nil)
	require.NoError(t, g.admit("east", eastCert), "lifted")
}

// One live tunnel per name: another certificate of the same name is
// refused while the live one's is valid, the same certificate replaces
// the live tunnel, and the newer certificate is admitted once the older
// one expired, when its tunnel is closed.
func TestOneLiveTunnelPerName(t *testing.T) {
	clk := testclock.NewFakeClock(guardNow)
	g := newTunnelGuard(nil, clk)
	first := nodeCert("east", 1, 10*time.Minute)
	renewed := nodeCert("east", 2, time.Hour)

	a, _ := open(t, g, "east", first)
	err := g.admit("east", renewed)
	require.ErrorIs(t, err, errTunnelConflict)
	require.ErrorContains(t, err, "already has a live tunnel with another certificate (serial 1")
	// Admitted in a race (checked before the first was held): closed at
	// the hijack, and the first stays.
	raced, _ := open(t, g, "east", renewed)
	requireClosed(t, raced, "a second certificate's tunnel is closed at the hijack")
	requireOpen(t, g, "east", a)

	// The same certificate again: the holder reconnecting; the old
	// connection goes.
	require.NoError(t, g.admit("east", first))
	b, _ := open(t, g, "east", first)
	requireClosed(t, a, "the replaced tunnel is closed")
	requireOpen(t, g, "east", b)

	// Another child is not concerned.
	require.NoError(t, g.admit("west", nodeCert("west", 3, time.Hour)))

	// The first certificate expires: its tunnel is closed, and the
	// renewed certificate comes in.
	clk.Step(10 * time.Minute)
	requireClosed(t, b, "the tunnel is closed when its certificate expires")
	require.ErrorContains(t, g.admit("east", first), "expired")
	require.NoError(t, g.admit("east", renewed))
	c, releaseC := open(t, g, "east", renewed)
	requireOpen(t, g, "east", c)
	releaseC()
	g.mu.Lock()
	require.Empty(t, g.conns, "released tunnels are forgotten")
	g.mu.Unlock()
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
