package launcher

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nestlet/nestlet/pkg/permissions"
)

// The launcher reads the permissions the agent and the proxy print, keeps
// those it was given, and says which program failed and why.
func TestPrintedIdentities(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		return path
	}
	own := &NestletBinaries{
		Nestlet: script("nestlet", `[ "$1" = --print-permissions ] && echo '[{"Resources":["pods"],"Verbs":["get"],"Why":"delegates"}]'`),
		Proxy:   script("nestlet-proxy", `echo '[{"Resources":["configmaps"],"Verbs":["get"]}]'`),
	}
	given := map[string][]permissions.Rule{ComponentProxy: {{Resources: []string{"nodes"}, Verbs: []string{"get"}}}}
	got, err := printedIdentities(own, given)
	require.NoError(t, err)
	require.Equal(t, []permissions.Rule{{Resources: []string{"pods"}, Verbs: []string{"get"}, Why: "delegates"}}, got[ComponentAgent])
	require.Equal(t, given[ComponentProxy], got[ComponentProxy], "what was given wins")
	require.Len(t, given, 1, "the given map is not changed")

	own.Nestlet = script("old-nestlet", `echo "unknown flag: --print-permissions" >&2; exit 2`)
	_, err = printedIdentities(own, nil)
	require.ErrorContains(t, err, "old-nestlet --print-permissions")
	require.ErrorContains(t, err, "make build")
}
