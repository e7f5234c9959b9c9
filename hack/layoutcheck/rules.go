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
// paths of the packages of ours it imports (tests excluded), and, for a
// command, every package it links.
type Package struct {
	Path    string
	Imports []string
	Deps    []string
}

// Rule forbids packages under From, but those under Exempt, to import
// packages under any of Deny but those under Allow (paths relative to the
// module; "x" covers x and everything below it, "" the whole module).
type Rule struct {
	From   string
	Exempt []string
	Deny   []string
	Allow  []string
	Why    string
}

// Rules are the folders' contracts (docs/architecture.md, "Layout"): the
// wire contracts depend on nothing of ours, the scheduler reads the wire
// contracts and never the agent, the child's side and the parent's side
// meet only in api/ and pkg/, and nothing but tests imports test/.
var Rules = []Rule{
	{From: "api", Deny: []string{""}, Allow: []string{"api"}, Why: "api/ holds the wire contracts and imports nothing of ours"},
	{From: "scheduler-plugins", Deny: []string{"provider", "proxy", "pkg/localcluster", "cmd"}, Why: "the scheduler reads the wire contracts in api/, never the agent"},
	{From: "provider", Deny: []string{"scheduler-plugins", "proxy", "pkg/localcluster", "cmd"}, Why: "the child's side (provider/) shares code with the parent's side only through api/ and pkg/"},
	{From: "proxy", Deny: []string{"provider", "scheduler-plugins", "pkg/localcluster", "cmd"}, Why: "the parent's side (proxy/) shares code with the child's side only through api/ and pkg/"},
	{From: "pkg", Deny: []string{"provider", "proxy", "cmd"}, Why: "pkg/ is shared by both sides and depends on neither"},
	{From: "", Exempt: []string{"test"}, Deny: []string{"test"}, Why: "only tests import test/"},
}

// under reports whether path is dir or below it ("" covers everything).
func under(path, dir string) bool {
	return dir == "" || path == dir || strings.HasPrefix(path, dir+"/")
}

// CheckImports returns one line per import that breaks a rule.
func CheckImports(pkgs []Package, rules []Rule) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range rules {
			if !under(p.Path, r.From) || slices.ContainsFunc(r.Exempt, func(e string) bool { return under(p.Path, e) }) {
				continue
			}
			for _, imp := range p.Imports {
				if slices.ContainsFunc(r.Allow, func(a string) bool { return under(imp, a) }) {
					continue
				}
				if slices.ContainsFunc(r.Deny, func(d string) bool { return under(imp, d) }) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", p.Path, imp, r.Why))
				}
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

// Size limits of product code (tests, test/ and hack/ excepted).
const (
	MaxFileLines = 500
	MaxFuncLines = 100
)

// isProduct reports whether the module-relative Go file is product code.
func isProduct(rel string) bool {
	return !strings.HasSuffix(rel, "_test.go") && !strings.HasPrefix(rel, "zz_generated") &&
		!strings.Contains(rel, "/zz_generated") && !under(rel, "test") && !under(rel, "hack")
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

// CheckReadmeLayout returns one line per top-level entry of the repository
// (entries: tracked files and folders, dot-files excepted) that the
// README's "## Layout" table does not name, and per path the table names
// that does not exist. A table cell names its paths in backquotes.
func CheckReadmeLayout(readme string, entries []string) []string {
	_, section, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return []string{"README.md has no \"## Layout\" section"}
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
			out = append(out, fmt.Sprintf("README.md's Layout table does not name %s", e))
		}
		delete(named, e)
	}
	for n := range named {
		out = append(out, fmt.Sprintf("README.md's Layout table names %s, which is not in the repository", n))
	}
	slices.Sort(out)
	return out
}
