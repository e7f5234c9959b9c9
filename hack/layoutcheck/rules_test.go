package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckImports(t *testing.T) {
	tests := []struct {
		name string
		pkg  Package
		want string // substring of the one problem; "" for none
	}{
		{name: "api imports only api", pkg: Package{Path: "api/v1alpha1", Imports: []string{"api"}}},
		{name: "api imports the agent", pkg: Package{Path: "api", Imports: []string{"provider/summary"}}, want: "api imports provider/summary"},
		{name: "scheduler reads api", pkg: Package{Path: "scheduler-plugins/watermark", Imports: []string{"api", "scheduler-plugins/internal/virtualnode"}}},
		{name: "scheduler imports the agent", pkg: Package{Path: "scheduler-plugins/internal/virtualnode", Imports: []string{"provider/summary"}}, want: "scheduler-plugins/internal/virtualnode imports provider/summary"},
		{name: "agent imports the scheduler", pkg: Package{Path: "provider/agent", Imports: []string{"scheduler-plugins/watermark"}}, want: "provider/agent imports scheduler-plugins/watermark"},
		{name: "agent imports the parent side", pkg: Package{Path: "provider/agent", Imports: []string{"proxy/bootstrap"}}, want: "provider/agent imports proxy/bootstrap"},
		{name: "proxy imports shared code", pkg: Package{Path: "proxy", Imports: []string{"pkg/tunnel", "pkg/kubeletapi", "api"}}},
		{name: "proxy imports the agent", pkg: Package{Path: "proxy", Imports: []string{"provider/forward"}}, want: "proxy imports provider/forward"},
		{name: "command imports the launcher", pkg: Package{Path: "cmd/nestctl/app", Imports: []string{"pkg/localcluster", "proxy/bootstrap"}}},
		{name: "command imports tests", pkg: Package{Path: "cmd/nestctl/app", Imports: []string{"test/framework"}}, want: "cmd/nestctl/app imports test/framework"},
		{name: "tests import tests", pkg: Package{Path: "test/e2e/join", Imports: []string{"test/framework", "pkg/localcluster"}}},
		{name: "launcher imports tests", pkg: Package{Path: "pkg/localcluster", Imports: []string{"test/framework"}}, want: "pkg/localcluster imports test/framework"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckImports([]Package{tt.pkg}, Rules)
			if tt.want == "" {
				require.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			require.Contains(t, got[0], tt.want)
		})
	}
}

func TestCheckShippedDeps(t *testing.T) {
	pkgs := []Package{
		{Path: "cmd/nestlet", Deps: []string{"fmt", "k8s.io/client-go/testing"}},
		{Path: "cmd/nestctl", Deps: []string{"fmt", "testing"}},
		{Path: "test/e2e/join", Deps: []string{"testing"}},
	}
	got := CheckShippedDeps(pkgs)
	require.Len(t, got, 1)
	require.Contains(t, got[0], "cmd/nestctl links the testing package")
}

func TestCheckSizes(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, src string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(src), 0o644))
	}
	long := "package p\n\nfunc Long() {\n" + strings.Repeat("\t_ = 1\n", MaxFuncLines) + "}\n"
	short := "package p\n\nfunc Short() {\n\t_ = 1\n}\n"
	big := "package p\n\n" + strings.Repeat("var _ = 1\n", MaxFileLines)
	write("provider/long.go", long)
	write("provider/short.go", short)
	write("provider/big.go", big)
	write("provider/long_test.go", long)
	write("test/e2e/long.go", long)
	got, err := CheckSizes(dir, []string{"provider/long.go", "provider/short.go", "provider/big.go", "provider/long_test.go", "test/e2e/long.go"})
	require.NoError(t, err)
	require.Len(t, got, 2, "%v", got)
	require.Contains(t, got[0], "provider/long.go:3: Long is 102 lines")
	require.Contains(t, got[1], "provider/big.go: 502 lines")
}

// TestTreeFollowsTheLayout runs the checks on this checkout, as `make
// verify` does.
func TestTreeFollowsTheLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("lists every package of the module")
	}
	t.Chdir("../..")
	require.NoError(t, run())
}

func TestCheckReadmeLayout(t *testing.T) {
	readme := "# X\n\n## Layout\n\n| path | what |\n|---|---|\n| `api/` | a |\n| `cmd/`, `go.mod` | b |\n\n## Next\n| `gone/` | c |\n"
	require.Empty(t, CheckReadmeLayout(readme, []string{"api", "cmd", "go.mod"}))
	require.Equal(t, []string{
		"README.md's Layout table does not name pkg",
		"README.md's Layout table names go.mod, which is not in the repository",
	}, CheckReadmeLayout(readme, []string{"api", "cmd", "pkg"}))
	require.Equal(t, []string{`README.md has no "## Layout" section`}, CheckReadmeLayout("# X\n", nil))
}
