package join

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestErrorf(t *testing.T) {
	inner := errors.New("connection refused")
	tests := []struct {
		name      string
		err       *Error
		wantText  string
		wantInner error
	}{
		{
			name:     "without a wrapped error",
			err:      Errorf("CSRDenied", nil, "request %s was denied", "csr-1"),
			wantText: "CSRDenied: request csr-1 was denied",
		},
		{
			name:      "with a wrapped error",
			err:       Errorf("ParentUnreachable", inner, "cannot reach %s", "https://parent"),
			wantText:  "ParentUnreachable: cannot reach https://parent: connection refused",
			wantInner: inner,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantText, tt.err.Error())
			assert.Equal(t, tt.wantInner, tt.err.Unwrap())
			if tt.wantInner != nil {
				assert.ErrorIs(t, tt.err, tt.wantInner)
			}
		})
	}
}

func TestReasonOf(t *testing.T) {
	inner := errors.New("x509: certificate signed by unknown authority")
	tests := []struct {
		name       string
		err        error
		wantReason string
		wantMsg    string
	}{
		{
			name:       "an *Error gives its reason and message",
			err:        Errorf("TokenRejected", nil, "the token is wrong"),
			wantReason: "TokenRejected",
			wantMsg:    "the token is wrong",
		},
		{
			name:       "the wrapped error is added to the message",
			err:        Errorf("CAMismatch", inner, "the CA does not match"),
			wantReason: "CAMismatch",
			wantMsg:    "the CA does not match (x509: certificate signed by unknown authority)",
		},
		{
			name:       "a wrapped *Error keeps its reason",
			err:        fmt.Errorf("joining: %w", Errorf("CSRDenied", nil, "denied")),
			wantReason: "CSRDenied",
			wantMsg:    "denied",
		},
		{
			name:       "an *Error wrapping an *Error gives the outer reason",
			err:        Errorf("NodeError", Errorf("ParentUnreachable", nil, "down"), "node failed"),
			wantReason: "NodeError",
			wantMsg:    "node failed (ParentUnreachable: down)",
		},
		{
			name:       "a plain error gets the fallback",
			err:        errors.New("something broke"),
			wantReason: "Fallback",
			wantMsg:    "something broke",
		},
		{
			name:       "a plain error wrapping a plain error gets the fallback",
			err:        fmt.Errorf("outer: %w", inner),
			wantReason: "Fallback",
			wantMsg:    "outer: x509: certificate signed by unknown authority",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, msg := ReasonOf(tt.err, "Fallback")
			require.Equal(t, tt.wantReason, reason)
			assert.Equal(t, tt.wantMsg, msg)
		})
	}
}
