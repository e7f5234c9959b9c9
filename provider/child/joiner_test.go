package child

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
)

// newCAPEM returns a self-signed CA certificate (PEM) for a new key, and a
// second certificate for the same key.
func newCAPEM(t *testing.T, cn string) (cert, sameKey []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	issue := func() []byte {
		ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: cn}, key)
		require.NoError(t, err)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	}
	return issue(), issue() // two certificates (random serials) for one key
}

func TestSameEndpoint(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{name: "identical", a: "https://10.0.0.1:6443", b: "https://10.0.0.1:6443", want: true},
		{name: "host case differs", a: "https://API.example.com:6443", b: "https://api.example.com:6443", want: true},
		{name: "path differs", a: "https://api.example.com:6443", b: "https://api.example.com:6443/", want: true},
		{name: "other port", a: "https://10.0.0.1:6443", b: "https://10.0.0.1:6444", want: false},
		{name: "other host", a: "https://10.0.0.1:6443", b: "https://10.0.0.2:6443", want: false},
		{name: "other scheme", a: "http://10.0.0.1:6443", b: "https://10.0.0.1:6443", want: false},
		{name: "unparsable", a: "https://10.0.0.1:6443", b: "https://[::1", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, sameEndpoint(tt.a, tt.b))
			assert.Equal(t, tt.want, sameEndpoint(tt.b, tt.a), "not symmetric")
		})
	}
}

func TestIsSelf(t *testing.T) {
	ownCA, ownCASameKey := newCAPEM(t, "own-ca")
	otherCA, _ := newCAPEM(t, "other-ca")
	tests := []struct {
		name      string
		ownCA     []byte
		parentURL string
		parentCA  []byte
		want      bool
	}{
		{name: "own URL", ownCA: ownCA, parentURL: "https://127.0.0.1:6443/", want: true},
		{name: "other URL without CA", ownCA: ownCA, parentURL: "https://10.0.0.2:6443"},
		{name: "own CA behind another URL", ownCA: ownCA, parentURL: "https://10.0.0.2:6443", parentCA: ownCA, want: true},
		{name: "own CA key in another certificate", ownCA: ownCA, parentURL: "https://10.0.0.2:6443", parentCA: ownCASameKey, want: true},
		{name: "own CA in a bundle", ownCA: ownCA, parentURL: "https://10.0.0.2:6443", parentCA: append(append([]byte{}, otherCA...), ownCA...), want: true},
		{name: "other CA", ownCA: ownCA, parentURL: "https://10.0.0.2:6443", parentCA: otherCA},
		{name: "no own CA", parentURL: "https://10.0.0.2:6443", parentCA: otherCA},
		{name: "garbage CA", ownCA: ownCA, parentURL: "https://10.0.0.2:6443", parentCA: []byte("not pem")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own := &rest.Config{
				Host:            "https://127.0.0.1:6443",
				TLSClientConfig: rest.TLSClientConfig{CAData: tt.ownCA},
			}
			assert.Equal(t, tt.want, isSelf(own, tt.parentURL, tt.parentCA))
		})
	}
}
