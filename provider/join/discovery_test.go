package join

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nestlet/nestlet/api/v1alpha1"
)

func TestClassify(t *testing.T) {
	const parent = "https://parent.example:6443"
	refused := &url.Error{Op: "Get", URL: parent + "/api", Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED),
	}}
	unknownCA := &url.Error{Op: "Get", URL: parent + "/api", Err: x509.UnknownAuthorityError{}}
	tests := []struct {
		name       string
		err        error
		wantReason string
		wantIn     string
	}{
		{name: "401", err: apierrors.NewUnauthorized("token expired"), wantReason: v1alpha1.ReasonTokenRejected, wantIn: "nestctl token create"},
		{name: "wrapped 401", err: fmt.Errorf("review: %w", apierrors.NewUnauthorized("no")), wantReason: v1alpha1.ReasonTokenRejected},
		{name: "unknown authority", err: x509.UnknownAuthorityError{}, wantReason: v1alpha1.ReasonCAMismatch, wantIn: "caBundle/caCertHash"},
		{name: "unknown authority in a url.Error", err: unknownCA, wantReason: v1alpha1.ReasonCAMismatch},
		{name: "hostname mismatch", err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "parent.example"}, wantReason: v1alpha1.ReasonCAMismatch},
		{name: "connection refused", err: refused, wantReason: v1alpha1.ReasonParentUnreachable, wantIn: parent},
		{name: "timeout", err: context.DeadlineExceeded, wantReason: v1alpha1.ReasonParentUnreachable, wantIn: parent},
		{name: "server error", err: apierrors.NewInternalError(errors.New("etcd down")), wantReason: v1alpha1.ReasonParentUnreachable, wantIn: "answered with an error"},
		{name: "forbidden", err: apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "child", errors.New("no")), wantReason: v1alpha1.ReasonParentUnreachable},
		{name: "anything else", err: errors.New("strange"), wantReason: v1alpha1.ReasonParentUnreachable, wantIn: parent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.err, parent)
			var je *Error
			require.True(t, errors.As(got, &je), "%v is not an *Error", got)
			assert.Equal(t, tt.wantReason, je.Reason)
			assert.Contains(t, je.Message, tt.wantIn)
			assert.ErrorIs(t, got, tt.err, "the cause is not wrapped")
			assert.Equal(t, got, Classify(tt.err, parent), "Classify differs from classify")
		})
	}
}
