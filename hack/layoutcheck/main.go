// Command layoutcheck fails when the tree breaks the layout's contracts:
// a forbidden import between folders (Rules), a shipped binary that links
// the testing package, product code over the size limits, or a top-level
// entry that docs/layout.md does not name. `make verify` runs it from the
// module root.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

const module = "github.com/nestlet/nestlet"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "layoutcheck:", err)
		os.Exit(1)
	}
}

func run() error {
	pkgs, err := load()
	if err != nil {
		return err
	}
	problems := append(CheckImports(pkgs, Rules), CheckShippedDeps(pkgs)...)
	files, err := repoFiles()
	if err != nil {
		return err
	}
	var goFiles []string
	for _, f := range files {
		if strings.HasSuffix(f, ".go") {
			goFiles = append(goFiles, f)
		}
	}
	sizes, err := CheckSizes(".", goFiles)
	if err != nil {
		return err
	}
	problems = append(problems, sizes...)
	doc, err := os.ReadFile(LayoutDoc)
	if err != nil {
		return err
	}
	problems = append(problems, CheckLayoutDoc(string(doc), topLevel(files))...)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d layout problems (see %s)", len(problems), LayoutDoc)
	}
	return nil
}

// load lists the module's packages with their imports of ours, and the
// dependencies of the commands.
func load() ([]Package, error) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", exitDetail(err))
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
			Name                               string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		pkg := Package{Path: rel(p.ImportPath)}
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if (imp == module || strings.HasPrefix(imp, module+"/")) && !slices.Contains(pkg.Imports, rel(imp)) && rel(imp) != pkg.Path {
				pkg.Imports = append(pkg.Imports, rel(imp))
			}
		}
		if p.Name == "main" && under(pkg.Path, "cmd") {
			deps, err := exec.Command("go", "list", "-deps", "./"+pkg.Path).Output()
			if err != nil {
				return nil, fmt.Errorf("go list -deps ./%s: %w", pkg.Path, exitDetail(err))
			}
			pkg.Deps = strings.Fields(string(deps))
		}
		pkgs = append(pkgs, pkg)
	}
	return pkgs, nil
}

func rel(importPath string) string {
	return strings.TrimPrefix(strings.TrimPrefix(importPath, module), "/")
}

// topLevel returns the top-level entries of the repository's files, dot
// files and folders excepted.
func topLevel(files []string) []string {
	var out []string
	for _, f := range files {
		top, _, _ := strings.Cut(f, "/")
		if !strings.HasPrefix(top, ".") && !slices.Contains(out, top) {
			out = append(out, top)
		}
	}
	return out
}

// repoFiles lists the files git tracks or would track, matching patterns.
func repoFiles(patterns ...string) ([]string, error) {
	out, err := exec.Command("git", append([]string{"ls-files", "--cached", "--others", "--exclude-standard"}, patterns...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", exitDetail(err))
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	return files, nil
}

func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}
