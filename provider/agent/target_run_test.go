package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nestlet/nestlet/api/v1alpha1"
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
			r := &targetRun{a: &Agent{cfg: Config{RESTConfig: &rest.Config{
				Host:            "https://127.0.0.1:6443",
				TLSClientConfig: rest.TLSClientConfig{CAData: tt.ownCA},
			}}}}
			assert.Equal(t, tt.want, r.isSelf(tt.parentURL, tt.parentCA))
		})
	}
}

func TestReportFrequency(t *testing.T) {
	tests := []struct {
		name string
		spec metav1.Duration
		want time.Duration
	}{
		{name: "default", want: 10 * time.Second},
		{name: "set", spec: metav1.Duration{Duration: 3 * time.Second}, want: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reportFrequency(&v1alpha1.Target{Spec: v1alpha1.TargetSpec{ReportFrequency: tt.spec}})
			assert.Equal(t, tt.want, got)
		})
	}
}

// A short outage of this cluster's API server is tolerated: the virtual
// nodes keep renewing their leases in the parents. A longer one, or one
// before the API server was ever ready, is not.
func TestOutageTolerance(t *testing.T) {
	down := errors.New("connection refused")
	clk := clocktesting.NewFakeClock(time.Now())
	var answer error
	newAgent := func(tol time.Duration) *readiness {
		return newReadiness(nil, func(context.Context) error { return answer }, tol, clk)
	}
	step := func(a *readiness, d time.Duration) error {
		clk.Step(d)
		return a.ready(t.Context())
	}

	a := newAgent(30 * time.Second)
	answer = down
	require.Error(t, step(a, 0), "never ready yet: nothing to tolerate")
	answer = nil
	require.NoError(t, step(a, 2*time.Second))
	answer = down
	require.NoError(t, step(a, 2*time.Second), "the outage starts: tolerated")
	require.NoError(t, step(a, 25*time.Second), "27 s after the last good check")
	require.ErrorIs(t, step(a, 5*time.Second), down, "32 s: past the tolerance")
	require.ErrorIs(t, step(a, 60*time.Second), down)
	answer = nil
	require.NoError(t, step(a, 2*time.Second), "ready again")
	answer = down
	require.NoError(t, step(a, 2*time.Second), "a new outage is tolerated afresh")

	a = newAgent(-1)
	answer = nil
	require.NoError(t, step(a, 2*time.Second))
	answer = down
	require.ErrorIs(t, step(a, 2*time.Second), down, "no tolerance")

	// One check answers every Target for readyTTL.
	a = newAgent(-1)
	answer = nil
	require.NoError(t, step(a, 2*time.Second))
	answer = down
	require.NoError(t, step(a, readyTTL/2), "the answer of a moment ago")
	require.Error(t, step(a, readyTTL))
}
