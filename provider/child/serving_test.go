package child

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/keyutil"
)

// The memory store holds the issued certificate only in memory, and says
// when there is none as the certificate manager expects.
func TestMemoryStore(t *testing.T) {
	s := &memoryStore{}
	_, err := s.Current()
	var none *certificate.NoCertKeyError
	require.True(t, errors.As(err, &none), "no certificate yet: %v", err)
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("node", nil, nil)
	require.NoError(t, err)
	c, err := s.Update(certPEM, keyPEM)
	require.NoError(t, err)
	cur, err := s.Current()
	require.NoError(t, err)
	require.Equal(t, c, cur)
	_, err = s.Update(certPEM, []byte("not a key"))
	require.Error(t, err)
	_, err = keyutil.ParsePrivateKeyPEM(keyPEM)
	require.NoError(t, err)
}

// Until the parent issues its certificate, the agent serves a self-signed
// one; then the issued one.
func TestServingCertFallsBackToSelfSigned(t *testing.T) {
	s, err := newServingCert("10.0.0.2")
	require.NoError(t, err)
	got, err := s.getCertificate(nil)
	require.NoError(t, err)
	require.Equal(t, &s.selfSigned, got)

	issued := &tls.Certificate{Certificate: [][]byte{[]byte("issued")}}
	var m certificate.Manager = fixedManager{issued}
	s.manager.Store(&m)
	got, err = s.getCertificate(nil)
	require.NoError(t, err)
	require.Equal(t, issued, got)

	m = fixedManager{nil} // a manager with nothing issued yet
	s.manager.Store(&m)
	got, err = s.getCertificate(nil)
	require.NoError(t, err)
	require.Equal(t, &s.selfSigned, got)
}

type fixedManager struct{ c *tls.Certificate }

func (f fixedManager) Start()                    {}
func (f fixedManager) Stop()                     {}
func (f fixedManager) Current() *tls.Certificate { return f.c }
func (f fixedManager) ServerHealthy() bool       { return true }
