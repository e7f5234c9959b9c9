package join

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

func TestCSRName(t *testing.T) {
	key, err := NewKey()
	require.NoError(t, err)
	other, err := NewKey()
	require.NoError(t, err)

	name, err := CSRName("child", key)
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`^nestlet-child-[0-9a-f]{10}$`), name)
	again, err := CSRName("child", key)
	require.NoError(t, err)
	assert.Equal(t, name, again, "not stable for one key")
	otherName, err := CSRName("child", other)
	require.NoError(t, err)
	assert.NotEqual(t, name, otherName, "the same for two keys")
}

// csrWatcher is the parent's watch of CSRs, driven by the test. Unlike
// watch.FakeWatcher, a send cannot block or panic once the watch is over.
type csrWatcher struct {
	ch       chan watch.Event
	stopOnce sync.Once
	stopped  chan struct{}
}

func newCSRWatcher() *csrWatcher {
	return &csrWatcher{ch: make(chan watch.Event), stopped: make(chan struct{})}
}

func (w *csrWatcher) Stop()                          { w.stopOnce.Do(func() { close(w.stopped) }) }
func (w *csrWatcher) ResultChan() <-chan watch.Event { return w.ch }

// send delivers ev unless the watch or the request is over (done).
func (w *csrWatcher) send(t *testing.T, ev watch.Event, done <-chan struct{}) {
	t.Helper()
	select {
	case w.ch <- ev:
	case <-w.stopped:
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("nobody watches for the %s event", ev.Type)
	}
}

func csrCondition(typ certificatesv1.RequestConditionType, status corev1.ConditionStatus) certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{Type: typ, Status: status, Reason: "Test" + string(typ), Message: "by the test"}
}

func TestRequestNodeCertificate(t *testing.T) {
	issuedPEM := []byte("-----BEGIN CERTIFICATE-----\nissued\n-----END CERTIFICATE-----\n")
	pending := func(*certificatesv1.CertificateSigningRequest) {}
	approved := func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Conditions = append(c.Status.Conditions, csrCondition(certificatesv1.CertificateApproved, corev1.ConditionTrue))
	}
	issued := func(c *certificatesv1.CertificateSigningRequest) {
		approved(c)
		c.Status.Certificate = issuedPEM
	}
	relabelled := func(c *certificatesv1.CertificateSigningRequest) { c.Labels = map[string]string{"seen": "yes"} }
	denied := func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Conditions = append(c.Status.Conditions, csrCondition(certificatesv1.CertificateDenied, corev1.ConditionTrue))
	}
	failed := func(c *certificatesv1.CertificateSigningRequest) {
		approved(c)
		c.Status.Conditions = append(c.Status.Conditions, csrCondition(certificatesv1.CertificateFailed, corev1.ConditionTrue))
	}
	notDenied := func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Conditions = append(c.Status.Conditions, csrCondition(certificatesv1.CertificateDenied, corev1.ConditionFalse))
	}
	type event struct {
		typ    watch.EventType
		mutate func(*certificatesv1.CertificateSigningRequest)
	}
	tests := []struct {
		name string
		// exists: the CSR is in the parent before the request (a restart).
		exists bool
		// initial is the CSR as the watch first shows it; events follow.
		initial func(*certificatesv1.CertificateSigningRequest)
		events  []event
		// awaitingFirst: awaiting is called before the events are sent.
		awaitingFirst bool
		wantAwaiting  int
		wantCert      bool
		wantReason    string
	}{
		{
			name:    "issued after approval",
			initial: pending,
			events: []event{
				{watch.Modified, relabelled},
				{watch.Modified, approved},
				{watch.Modified, issued},
			},
			awaitingFirst: true,
			wantAwaiting:  1,
			wantCert:      true,
		},
		{
			name:     "approved when first seen",
			initial:  approved,
			events:   []event{{watch.Modified, issued}},
			wantCert: true,
		},
		{
			name:     "issued before the request (restart)",
			exists:   true,
			initial:  issued,
			wantCert: true,
		},
		{
			name:          "a condition that is not true does not count",
			initial:       notDenied,
			events:        []event{{watch.Modified, relabelled}, {watch.Modified, issued}},
			awaitingFirst: true,
			wantAwaiting:  1,
			wantCert:      true,
		},
		{
			name:          "denied",
			initial:       pending,
			events:        []event{{watch.Modified, relabelled}, {watch.Modified, denied}},
			awaitingFirst: true,
			wantAwaiting:  1,
			wantReason:    v1alpha1.ReasonCSRDenied,
		},
		{
			name:       "denied when first seen",
			initial:    denied,
			wantReason: v1alpha1.ReasonCSRDenied,
		},
		{
			name:         "signing failed",
			initial:      pending,
			events:       []event{{watch.Modified, failed}},
			wantAwaiting: 1,
			wantReason:   v1alpha1.ReasonCSRDenied,
		},
		{
			name:         "deleted",
			initial:      pending,
			events:       []event{{watch.Deleted, pending}},
			wantAwaiting: 1,
			wantReason:   v1alpha1.ReasonCSRDenied,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			key, err := NewKey()
			require.NoError(t, err)
			name, err := CSRName("child", key)
			require.NoError(t, err)
			csr := func(rv string, mutate func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
				c := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
				mutate(c)
				return c
			}

			client := fake.NewClientset()
			if tt.exists {
				require.NoError(t, client.Tracker().Add(csr("1", tt.initial)))
			}
			w := newCSRWatcher()
			client.PrependWatchReactor("certificatesigningrequests", func(k8stesting.Action) (bool, watch.Interface, error) {
				return true, w, nil
			})

			var (
				mu       sync.Mutex
				awaiting []string
			)
			awaitingCalls := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return append([]string(nil), awaiting...)
			}
			type result struct {
				cert []byte
				err  error
			}
			results := make(chan result, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				cert, err := RequestNodeCertificate(ctx, client, "child", key, func(n string) {
					mu.Lock()
					defer mu.Unlock()
					awaiting = append(awaiting, n)
				})
				results <- result{cert, err}
			}()

			// The initial state, then the end of it, as a watch-list stream
			// delivers them; a list-then-watch reflector takes them as updates.
			w.send(t, watch.Event{Type: watch.Added, Object: csr("2", tt.initial)}, done)
			w.send(t, watch.Event{Type: watch.Bookmark, Object: &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{
				ResourceVersion: "2", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"},
			}}}, done)
			if tt.awaitingFirst {
				require.Eventually(t, func() bool { return len(awaitingCalls()) > 0 }, 10*time.Second, 5*time.Millisecond,
					"awaiting not called while the CSR is pending")
			}
			for i, ev := range tt.events {
				w.send(t, watch.Event{Type: ev.typ, Object: csr(string(rune('3'+i)), ev.mutate)}, done)
			}

			var got result
			select {
			case got = <-results:
			case <-ctx.Done():
				t.Fatal("RequestNodeCertificate did not return")
			}
			if tt.wantReason != "" {
				require.Error(t, got.err)
				var je *Error
				require.True(t, errors.As(got.err, &je), "%v is not an *Error", got.err)
				assert.Equal(t, tt.wantReason, je.Reason)
				assert.Contains(t, je.Message, name)
				assert.Nil(t, got.cert)
			} else {
				require.NoError(t, got.err)
				assert.Equal(t, issuedPEM, got.cert)
			}
			var wantAwaiting []string
			for range tt.wantAwaiting {
				wantAwaiting = append(wantAwaiting, name)
			}
			if d := cmp.Diff(wantAwaiting, awaitingCalls()); d != "" {
				t.Errorf("awaiting calls mismatch (-want +got):\n%s", d)
			}
			if !tt.exists {
				checkCreatedCSR(t, client, name, key.Public())
			}
		})
	}
}

// checkCreatedCSR checks the CSR the request created in the parent.
func checkCreatedCSR(t *testing.T, client *fake.Clientset, name string, pub any) {
	t.Helper()
	var created *certificatesv1.CertificateSigningRequest
	for _, a := range client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "certificatesigningrequests" {
			require.Nil(t, created, "more than one CSR created")
			created = c.GetObject().(*certificatesv1.CertificateSigningRequest)
		}
	}
	require.NotNil(t, created, "no CSR created")
	assert.Equal(t, name, created.Name)
	assert.Equal(t, "kubernetes.io/kube-apiserver-client-kubelet", created.Spec.SignerName)
	assert.Equal(t, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, created.Spec.Usages)
	block, _ := pem.Decode(created.Spec.Request)
	require.NotNil(t, block, "request is not PEM")
	assert.Equal(t, "CERTIFICATE REQUEST", block.Type)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	require.NoError(t, req.CheckSignature())
	assert.Equal(t, "system:node:child", req.Subject.CommonName)
	assert.Equal(t, []string{"system:nodes"}, req.Subject.Organization)
	assert.True(t, pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(req.PublicKey), "request is not for the key")
}

func TestRequestNodeCertificateCreateFails(t *testing.T) {
	gr := schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	tests := []struct {
		name       string
		err        error
		wantReason string
	}{
		{name: "forbidden", err: apierrors.NewForbidden(gr, "", errors.New("no")), wantReason: v1alpha1.ReasonTokenRejected},
		{name: "a node asking for another name", err: apierrors.NewForbidden(gr, "x", errors.New("can only create a node CSR with CN=system:node:east")), wantReason: v1alpha1.ReasonCSRDenied},
		{name: "unauthorized", err: apierrors.NewUnauthorized("expired"), wantReason: v1alpha1.ReasonTokenRejected},
		{name: "server error", err: apierrors.NewInternalError(errors.New("boom")), wantReason: v1alpha1.ReasonParentUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := NewKey()
			require.NoError(t, err)
			client := fake.NewClientset()
			client.PrependReactor("create", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			called := false
			cert, err := RequestNodeCertificate(t.Context(), client, "child", key, func(string) { called = true })
			require.Error(t, err)
			assert.Nil(t, cert)
			var je *Error
			require.True(t, errors.As(err, &je), "%v is not an *Error", err)
			assert.Equal(t, tt.wantReason, je.Reason)
			assert.ErrorIs(t, err, tt.err, "the cause is not wrapped")
			assert.False(t, called, "awaiting called")
			for _, a := range client.Actions() {
				assert.NotEqual(t, "watch", a.GetVerb(), "watched after a failed create")
			}
		})
	}
}
