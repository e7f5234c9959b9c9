package command

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nestlet/nestlet/pkg/permissions"
)

var rules = []permissions.Rule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, Why: "a test"}}

// --print-permissions writes the rules and runs nothing.
func TestRunPrintsPermissions(t *testing.T) {
	var out, want bytes.Buffer
	require.NoError(t, permissions.Write(&want, rules))
	err := Run(t.Context(), &out, true, rules, func(context.Context) error {
		t.Fatal("the command ran while asked to print its permissions")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, want.String(), out.String())
}

// Otherwise the command runs with a context ended with its parent, and its
// error is returned as it is.
func TestRunRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	failed := errors.New("failed")
	var out bytes.Buffer
	err := Run(ctx, &out, false, rules, func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		return failed
	})
	require.ErrorIs(t, err, failed)
	require.Empty(t, out.String())
}
