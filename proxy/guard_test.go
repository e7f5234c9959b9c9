package proxy

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nestlet/nestlet/pkg/tunnel"
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
	return openWith(t, g, name, cert, "")
}

// openWith is open with a handover; a tunnel the guard refuses now is
// still taken (as one that raced another), and closed at the hijack.
func openWith(t *testing.T, g *tunnelGuard, name string, cert *x509.Certificate, handover string) (net.Conn, func()) {
	t.Helper()
	adm, _ := g.admit(name, cert, handover)
	ours, theirs := net.Pipe()
	w, release := g.track(&hijackable{ResponseRecorder: httptest.NewRecorder(), conn: ours}, name, cert, handover, adm)
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
	require.ErrorContains(t, admitErr(g, "east", nodeCert("east", 1, time.Hour)), "not read yet")
}

// A revoked child's live tunnel is closed at once, and its new ones are
// refused; another child's stays.
func TestRevokedTunnelsClosedAndRefused(t *testing.T) {
	g := newTunnelGuard(nil, testclock.NewFakeClock(guardNow))
	eastCert, westCert := nodeCert("east", 1, time.Hour), nodeCert("west", 2, time.Hour)
	east, releaseEast := open(t, g, "east", eastCert)
	west, releaseWest := open(t, g, "west", westCert)
	defer releaseWest()
	require.NoError(t, admitErr(g, "east", eastCert))

	g.revoked.Set(map[string]string{"east": "2026-11-25T12:00:00Z"})
	requireClosed(t, east, "east's tunnel is closed")
	require.ErrorContains(t, admitErr(g, "east", eastCert), `node "east" was revoked`)
	require.NoError(t, admitErr(g, "west", westCert))
	releaseEast()
	requireOpen(t, g, "west", west)

	// One that was admitted before the revocation and hijacked after it
	// is closed at the hijack.
	late, _ := open(t, g, "east", eastCert)
	requireClosed(t, late, "a tunnel taken over after the revocation is closed")

	g.revoked.Set(nil)
	require.NoError(t, admitErr(g, "east", eastCert), "lifted")
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
	err := admitErr(g, "east", renewed)
	require.ErrorIs(t, err, errTunnelConflict)
	require.ErrorContains(t, err, "already has a live tunnel with another certificate (serial 1")
	// Admitted in a race (checked before the first was held): closed at
	// the hijack, and the first stays.
	raced, _ := open(t, g, "east", renewed)
	requireClosed(t, raced, "a second certificate's tunnel is closed at the hijack")
	requireOpen(t, g, "east", a)

	// The same certificate again: the holder reconnecting; the old
	// connection goes.
	require.NoError(t, admitErr(g, "east", first))
	b, _ := open(t, g, "east", first)
	requireClosed(t, a, "the replaced tunnel is closed")
	requireOpen(t, g, "east", b)

	// Another child is not concerned.
	require.NoError(t, admitErr(g, "west", nodeCert("west", 3, time.Hour)))

	// The first certificate expires: its tunnel is closed, and the
	// renewed certificate comes in.
	clk.Step(10 * time.Minute)
	requireClosed(t, b, "the tunnel is closed when its certificate expires")
	require.ErrorContains(t, admitErr(g, "east", first), "expired")
	require.NoError(t, admitErr(g, "east", renewed))
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

// admitErr is why g refuses a tunnel of name with cert and no handover.
func admitErr(g *tunnelGuard, name string, cert *x509.Certificate) error {
	_, err := g.admit(name, cert, "")
	return err
}

// requireNotClosed fails if the child's end of a tunnel reads EOF within
// a moment (nothing is written on it in these tests).
func requireNotClosed(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, msg)
}

// keyedCert is nodeCert with a key of its own and DER bytes to sign.
func keyedCert(t *testing.T, name string, serial int64, life time.Duration) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	c := nodeCert(name, serial, life)
	c.PublicKey = &key.PublicKey
	c.Raw = []byte(fmt.Sprintf("certificate %d", serial))
	return c, key
}

// A renewed certificate whose tunnel carries the live one's handover
// lives beside it and takes the new connections; the predecessor stays
// until closed, past its certificate's expiry while a successor's is
// valid; a handover by another key, or none, is refused.
func TestSuccessorWithHandover(t *testing.T) {
	clk := testclock.NewFakeClock(guardNow)
	g := newTunnelGuard(nil, clk)
	first, firstKey := keyedCert(t, "east", 1, 10*time.Minute)
	renewed, renewedKey := keyedCert(t, "east", 2, 20*time.Minute)
	third, _ := keyedCert(t, "east", 3, time.Hour)
	a, _ := open(t, g, "east", first)
	require.Equal(t, []string{"east"}, g.keys("east"))

	forged, err := tunnel.SignHandover(renewedKey, renewed.Raw)
	require.NoError(t, err)
	_, err = g.admit("east", renewed, forged)
	require.ErrorIs(t, err, errTunnelConflict)
	require.ErrorContains(t, err, "the handover does not hold")

	proof, err := tunnel.SignHandover(firstKey, renewed.Raw)
	require.NoError(t, err)
	b, releaseB := openWith(t, g, "east", renewed, proof)
	requireNotClosed(t, a, "the predecessor stays")
	requireNotClosed(t, b, "the successor is taken")
	require.Equal(t, []string{"east#2", "east"}, g.keys("east"), "new connections go through the successor")

	require.ErrorIs(t, admitErr(g, "east", third), errTunnelConflict, "no handover, no third tunnel")
	_, err = g.admit("east", third, proof)
	require.ErrorIs(t, err, errTunnelConflict, "a handover for another certificate")

	again, err := tunnel.SignHandover(renewedKey, third.Raw)
	require.NoError(t, err)
	c, releaseC := openWith(t, g, "east", third, again)
	requireNotClosed(t, a, "the first predecessor still drains")
	require.Equal(t, []string{"east#3", "east#2", "east"}, g.keys("east"))

	clk.Step(10 * time.Minute)
	time.Sleep(100 * time.Millisecond) // expiries run in goroutines
	requireNotClosed(t, a, "a predecessor outlives its certificate while a successor's is valid")
	releaseB()
	releaseC()
	requireClosed(t, c, "released")
	clk.Step(time.Hour)
	requireClosed(t, a, "with no successor left, the expired predecessor is closed")
	g.mu.Lock()
	require.Empty(t, g.conns)
	g.mu.Unlock()
	require.Equal(t, []string{"east", "east#2", "east#3", "east#4"}, g.keys("east"), "no tunnel here: every key, for the peers")
}
