package join

import (
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// A renewed certificate is presented from the next request on, by the same
// client, and the connection made with the old one is closed.
func TestClientCertRotate(t *testing.T) {
	var mu sync.Mutex
	var serials []string
	closed := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if len(r.TLS.PeerCertificates) == 0 {
			serials = append(serials, "none")
		} else {
			serials = append(serials, r.TLS.PeerCertificates[0].SerialNumber.String())
		}
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			mu.Lock()
			closed++
			mu.Unlock()
		}
	}
	srv.StartTLS()
	defer srv.Close()

	ca := newTestCA(t)
	parent := &Parent{URL: srv.URL, CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	now := time.Now()
	first := newTestIdentity(t, ca, parent, "east", now.Add(-time.Minute), now.Add(time.Hour))
	second := newTestIdentity(t, ca, parent, "east", now.Add(-time.Minute), now.Add(2*time.Hour))

	cert, err := NewClientCert(first)
	require.NoError(t, err)
	cfg, err := first.RotatingRESTConfig(cert)
	require.NoError(t, err)
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	get := func() {
		t.Helper()
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	get()
	get()
	require.NoError(t, cert.Rotate(second))
	get()

	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return closed == 1 }, 5*time.Second, 10*time.Millisecond,
		"the connection made with the old certificate is closed")
	mu.Lock()
	defer mu.Unlock()
	want := []string{first.cert.SerialNumber.String(), first.cert.SerialNumber.String(), second.cert.SerialNumber.String()}
	require.Equal(t, want, serials, "the old certificate until the rotation, the new one after")
}

func TestRotatingRESTConfigNeedsCA(t *testing.T) {
	ca := newTestCA(t)
	id := newTestIdentity(t, ca, &Parent{URL: "https://parent", CAData: []byte("not a certificate")}, "east", t0, t0.Add(time.Hour))
	cert, err := NewClientCert(id)
	require.NoError(t, err)
	_, err = id.RotatingRESTConfig(cert)
	require.Error(t, err)
}
