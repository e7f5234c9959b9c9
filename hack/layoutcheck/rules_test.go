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
		{name: "agent imports the launcher", pkg: Package{Path: "provider/agent", Imports: []string{"launcher"}}, want: "provider/agent imports launcher"},
		{name: "agent wires both sides and the peers", pkg: Package{Path: "provider/agent", Imports: []string{"provider/child", "provider/parent", "provider/peers", "pkg/kubeclient"}}},
		{name: "child side imports the parent side", pkg: Package{Path: "provider/child", Imports: []string{"provider/parent"}}, want: "provider/child imports provider/parent"},
		{name: "child side imports the wiring", pkg: Package{Path: "provider/child", Imports: []string{"provider/agent"}}, want: "provider/child imports provider/agent"},
		{name: "child side uses the forwarder and the peers", pkg: Package{Path: "provider/child", Imports: []string{"provider/forward", "provider/join", "provider/peers", "provider/vnode"}}},
		{name: "parent side imports the child side", pkg: Package{Path: "provider/parent", Imports: []string{"provider/child"}}, want: "provider/parent imports provider/child"},
		{name: "peers import a side", pkg: Package{Path: "provider/peers", Imports: []string{"provider/parent"}}, want: "provider/peers imports provider/parent"},
		{name: "forwarder imports the child side", pkg: Package{Path: "provider/forward", Imports: []string{"provider/child"}}, want: "provider/forward imports provider/child"},
		{name: "proxy imports shared code", pkg: Package{Path: "proxy", Imports: []string{"pkg/tunnel", "pkg/kubeletapi", "api"}}},
		{name: "proxy imports the agent", pkg: Package{Path: "proxy", Imports: []string{"provider/forward"}}, want: "proxy imports provider/forward"},
		{name: "shared code imports the scheduler", pkg: Package{Path: "pkg/kubeletapi", Imports: []string{"scheduler-plugins/profile"}}, want: "pkg/kubeletapi imports scheduler-plugins/profile"},
		{name: "shared code imports the launcher", pkg: Package{Path: "pkg/tunnel", Imports: []string{"launcher"}}, want: "pkg/tunnel imports launcher"},
		{name: "nestctl uses the join and the bootstrap", pkg: Package{Path: "nestctl", Imports: []string{"api", "provider/join", "proxy/bootstrap", "charts/nestlet/crds"}}},
		{name: "nestctl imports the agent", pkg: Package{Path: "nestctl", Imports: []string{"provider/agent"}}, want: "nestctl imports provider/agent"},
		{name: "launcher writes the scheduler profile", pkg: Package{Path: "launcher", Imports: []string{"api", "scheduler-plugins/profile", "charts/nestlet/crds"}}},
		{name: "launcher imports the agent", pkg: Package{Path: "launcher", Imports: []string{"provider/agent"}}, want: "launcher imports provider/agent"},
		{name: "launcher imports tests", pkg: Package{Path: "launcher", Imports: []string{"test/framework"}}, want: "launcher imports test/framework"},
		{name: "nestctl command wires the launcher", pkg: Package{Path: "cmd/nestctl/app", Imports: []string{"launcher", "nestctl", "pkg/kubeclient"}}},
		{name: "nestctl command holds logic of the proxy", pkg: Package{Path: "cmd/nestctl/app", Imports: []string{"proxy/bootstrap"}}, want: "cmd/nestctl/app imports proxy/bootstrap"},
		{name: "command imports tests", pkg: Package{Path: "cmd/nestctl/app", Imports: []string{"test/framework"}}, want: "cmd/nestctl/app imports test/framework"},
		{name: "agent command imports the launcher", pkg: Package{Path: "cmd/nestlet", Imports: []string{"provider/agent", "launcher"}}, want: "cmd/nestlet imports launcher"},
		{name: "a command without a rule of its own", pkg: Package{Path: "cmd/nestlet-gateway", Imports: []string{"provider/agent"}}, want: "cmd/nestlet-gateway imports provider/agent"},
		{name: "tests import anything", pkg: Package{Path: "test/e2e/join", Imports: []string{"test/framework", "launcher", "provider/join"}}},
		{name: "a new folder has no rule", pkg: Package{Path: "gateway", Imports: []string{"api"}}, want: "gateway: no rule covers this folder"},
		{name: "a new folder without imports has no rule either", pkg: Package{Path: "gateway"}, want: "gateway: no rule covers this folder"},
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

func TestCheckLayoutDoc(t *testing.T) {
	doc := "# X\n\n## Top level\n\n| path | what |\n|---|---|\n| `api/` | a |\n| `cmd/`, `go.mod` | b |\n\n## Next\n| `gone/` | c |\n"
	require.Empty(t, CheckLayoutDoc(doc, []string{"api", "cmd", "go.mod"}))
	require.Equal(t, []string{
		"docs/layout.md's top-level table does not name pkg",
		"docs/layout.md's top-level table names go.mod, which is not in the repository",
	}, CheckLayoutDoc(doc, []string{"api", "cmd", "pkg"}))
	require.Equal(t, []string{`docs/layout.md has no "## Top level" section`}, CheckLayoutDoc("# X\n", nil))
}
