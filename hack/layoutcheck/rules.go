package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Package is what the rules need of one package of the module: its import
// path relative to the module ("provider/agent"), the module-relative
// paths of the packages of ours it or its tests import, and, for a
// command, every package it links.
type Package struct {
	Path    string
	Imports []string
	Deps    []string
}

// Rule says which packages of ours the packages under From may import:
// those under one of Allow (paths relative to the module; "x" covers x and
// everything below it, "" the whole module). A package follows the rule
// of the longest From that covers it; a package that no rule covers is a
// problem too, so that a new folder gets its rule on purpose.
type Rule struct {
	From  string
	Allow []string
	Why   string
}

// Rules are the folders' contracts (docs/layout.md, "Which folder may
// import which"): an allow-list, so that a new arrow between folders is
// refused until it is added here on purpose. Tests count with their
// package.
var Rules = []Rule{
	{From: "api", Allow: []string{"api"}, Why: "api/ holds the wire contracts and imports nothing else of ours"},
	{From: "pkg", Allow: []string{"api", "pkg"}, Why: "pkg/ is the code both sides share: it depends on the wire contracts and libraries only"},
	{From: "provider", Allow: []string{"api", "pkg", "provider/forward", "provider/gateway", "provider/join", "provider/noderoutes", "provider/summary", "provider/vnode"},
		Why: "the agent's building blocks (forward, gateway, join, noderoutes, summary, vnode) meet the proxy (proxy/) only in api/ and pkg/, and never import the agent's sides or its wiring"},
	{From: "provider/agent", Allow: []string{"api", "pkg", "provider/child", "provider/parent", "provider/peers", "provider/forward"},
		Why: "provider/agent only wires the agent's two sides and its gateway"},
	{From: "provider/child", Allow: []string{"api", "pkg", "provider/child", "provider/forward", "provider/join", "provider/peers", "provider/summary", "provider/vnode"},
		Why: "the child's side (a Target's run) never imports the parent's side or the wiring: the two meet in api/ and on the virtual node"},
	{From: "provider/parent", Allow: []string{"api", "pkg", "provider/parent", "provider/join", "provider/peers", "provider/summary"},
		Why: "the parent's side (what a cluster does about its children's virtual nodes) never imports the child's side or the wiring"},
	{From: "provider/peers", Allow: []string{"api", "pkg", "provider/peers", "provider/gateway", "provider/noderoutes"},
		Why: "the WireGuard peers sit on the gateway device and publish for the route agents, below both sides of the agent"},
	{From: "proxy", Allow: []string{"api", "pkg", "proxy"}, Why: "the proxy (proxy/) meets the agent (provider/) only in api/ and pkg/"},
	{From: "scheduler-plugins", Allow: []string{"api", "pkg/quota", "pkg/permissions", "scheduler-plugins"}, Why: "the scheduler reads the wire contracts in api/ and the parent's quotas (pkg/quota), and lists its permissions (pkg/permissions), never the agent"},
	{From: "charts", Allow: []string{"charts"}, Why: "the chart's Go package (the CRDs) depends on nothing of ours"},
	{From: "nestctl", Allow: []string{"api", "pkg", "charts/nestlet/crds", "provider/join", "proxy/bootstrap"},
		Why: "nestctl's operations use the join's discovery (provider/join) and the parent's bootstrap plumbing (proxy/bootstrap), nothing else of the components"},
	{From: "launcher", Allow: []string{"api", "pkg", "charts/nestlet/crds", "charts/nestlet/policies", "scheduler-plugins/profile", "launcher"},
		Why: "the launcher starts clusters and runs our programs as processes: it links the CRDs, the admission policies and the scheduler profile it installs, never the components' code"},
	{From: "cmd", Allow: []string{"pkg/kubeclient"}, Why: "cmd/ holds flags and wiring: each command imports the one package it runs"},
	{From: "cmd/nestlet", Allow: []string{"api", "pkg/command", "pkg/kubeclient", "provider/agent"}, Why: "cmd/nestlet wires the agent (its main and --print-permissions in pkg/command)"},
	{From: "cmd/nestlet-routes", Allow: []string{"api", "pkg/command", "pkg/kubeclient", "provider/noderoutes"}, Why: "cmd/nestlet-routes wires the route agent (its main and --print-permissions in pkg/command)"},
	{From: "cmd/nestlet-proxy", Allow: []string{"pkg/command", "pkg/kubeclient", "proxy"}, Why: "cmd/nestlet-proxy wires the proxy (its main and --print-permissions in pkg/command)"},
	{From: "cmd/nestlet-scheduler", Allow: []string{"scheduler-plugins"}, Why: "cmd/nestlet-scheduler registers the plugins"},
	{From: "cmd/nestctl", Allow: []string{"api", "pkg/kubeclient", "cmd/nestctl", "nestctl", "launcher"}, Why: "cmd/nestctl wires nestctl's operations and, for the playground, the launcher"},
	{From: "test", Allow: []string{""}, Why: "tests may import anything"},
	{From: "hack", Allow: nil, Why: "hack/ tools stand alone"},
}

// under reports whether path is dir or below it ("" covers everything).
func under(path, dir string) bool {
	return dir == "" || path == dir || strings.HasPrefix(path, dir+"/")
}

// ruleFor returns the rule of the longest From covering path, or nil.
func ruleFor(path string, rules []Rule) *Rule {
	var best *Rule
	for i := range rules {
		r := &rules[i]
		if under(path, r.From) && (best == nil || len(r.From) > len(best.From)) {
			best = r
		}
	}
	return best
}

// CheckImports returns one line per import the rules do not allow, and
// per package no rule covers.
func CheckImports(pkgs []Package, rules []Rule) []string {
	var out []string
	for _, p := range pkgs {
		r := ruleFor(p.Path, rules)
		if r == nil {
			out = append(out, fmt.Sprintf("%s: no rule covers this folder: add one to hack/layoutcheck/rules.go saying what it may import", p.Path))
			continue
		}
		for _, imp := range p.Imports {
			if !slices.ContainsFunc(r.Allow, func(a string) bool { return under(imp, a) }) {
				out = append(out, fmt.Sprintf("%s imports %s, which its rule (from %s: %s) does not allow: %s; if this arrow is meant, add it to hack/layoutcheck/rules.go and docs/layout.md",
					p.Path, imp, r.From, strings.Join(r.Allow, ", "), r.Why))
			}
		}
	}
	return out
}

// CheckShippedDeps returns one line per shipped command (cmd/...) that
// links the standard "testing" package.
func CheckShippedDeps(pkgs []Package) []string {
	var out []string
	for _, p := range pkgs {
		if under(p.Path, "cmd") && slices.Contains(p.Deps, "testing") {
			out = append(out, fmt.Sprintf("%s links the testing package: a shipped binary must not depend on test code (go list -deps ./%s)", p.Path, p.Path))
		}
	}
	return out
}

// Size limits of product code (tests, test/, hack/ and third_party/, which
// keeps upstream's shape, excepted).
const (
	MaxFileLines = 500
	MaxFuncLines = 100
)

// isProduct reports whether the module-relative Go file is product code.
func isProduct(rel string) bool {
	return !strings.HasSuffix(rel, "_test.go") && !strings.HasPrefix(rel, "zz_generated") &&
		!strings.Contains(rel, "/zz_generated") && !under(rel, "test") && !under(rel, "hack") && !under(rel, "third_party")
}

// CheckSizes returns one line per product file over MaxFileLines and per
// function over MaxFuncLines; files are module-relative paths under root.
func CheckSizes(root string, files []string) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	for _, rel := range files {
		if !isProduct(rel) {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, rel, src, 0)
		if err != nil {
			return nil, err
		}
		if n := fset.File(f.Pos()).LineCount(); n > MaxFileLines {
			out = append(out, fmt.Sprintf("%s: %d lines, over %d: split it by concern", rel, n, MaxFileLines))
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			name := "func literal"
			switch fn := n.(type) {
			case *ast.FuncDecl:
				body, name = fn.Body, fn.Name.Name
			case *ast.FuncLit:
				body = fn.Body
			}
			if body == nil {
				return true
			}
			start, end := fset.Position(n.Pos()), fset.Position(body.End())
			if lines := end.Line - start.Line + 1; lines > MaxFuncLines {
				out = append(out, fmt.Sprintf("%s:%d: %s is %d lines, over %d", rel, start.Line, name, lines, MaxFuncLines))
			}
			return true
		})
	}
	return out, nil
}

// LayoutDoc is the page that maps the repository, and LayoutSection the
// heading of its table of the top level.
const (
	LayoutDoc     = "docs/layout.md"
	LayoutSection = "## Top level"
)

// CheckLayoutDoc returns one line per top-level entry of the repository
// (entries: tracked files and folders, dot-files excepted) that the table
// under LayoutSection of LayoutDoc (doc, the page's text) does not name,
// and per path the table names that does not exist. A row names its paths
// in backquotes in its first cell: | `api/` | ... |.
func CheckLayoutDoc(doc string, entries []string) []string {
	_, section, ok := strings.Cut(doc, "\n"+LayoutSection+"\n")
	if !ok {
		return []string{fmt.Sprintf("%s has no %q section", LayoutDoc, LayoutSection)}
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	named := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, part := range strings.Split(first, "`") {
			part = strings.TrimSuffix(strings.TrimSpace(part), "/")
			if part != "" && part != "," {
				named[part] = true
			}
		}
	}
	var out []string
	for _, e := range entries {
		if !named[e] {
			out = append(out, fmt.Sprintf("%s's top-level table does not name %s", LayoutDoc, e))
		}
		delete(named, e)
	}
	for n := range named {
		out = append(out, fmt.Sprintf("%s's top-level table names %s, which is not in the repository", LayoutDoc, n))
	}
	slices.Sort(out)
	return out
}
