// Command table writes the result of a conformance run (hack/conformance.sh)
// from the ginkgo JSON reports of the same specs run against a leaf directly
// (the baseline) and against the root: docs/conformance.md (counts, and each
// spec the root fails with the reason the suite gave, or the exception's),
// the whole per-spec table of the run beside it, and the counts in the
// README's status line between its markers.
//
//	table -leaf leaf.json -root root.json -exceptions hack/conformance-exceptions.txt \
//	  -summary docs/conformance.md -full docs/conformance/2026-11-29.md -readme README.md \
//	  -title "2026-11-29, v1.35.4, commit abc1234" -selection "labels Conformance && !Serial ..."
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// result is one spec's outcome at one side: "passed", "failed" (the
// suite's reason beside it), or "" (not run there).
type result struct {
	state  string
	reason string
}

// spec is one spec of the run at both sides.
type spec struct {
	name       string
	leaf, root result
	exception  string // why the root may fail it (hack/conformance/exceptions.txt)
}

// run is what one ginkgo report says: results by spec, and its duration.
type run struct {
	results map[string]result
	took    time.Duration
}

func main() {
	leafPath := flag.String("leaf", "", "ginkgo JSON report of the run against the leaf")
	rootPath := flag.String("root", "", "ginkgo JSON report of the run against the root")
	exceptionsPath := flag.String("exceptions", "", "the exceptions: lines of spec name, a tab, the reason")
	summaryPath := flag.String("summary", "", "write the summary page here (docs/conformance.md)")
	fullPath := flag.String("full", "", "write the whole per-spec table here")
	readmePath := flag.String("readme", "", "rewrite the counts between the conformance markers of this README")
	title := flag.String("title", "", "what run this was (date, version, commit)")
	selection := flag.String("selection", "", "which specs were run (labels, focus)")
	name := flag.String("name", "conformance", "what the README's line and the page's title call this selection (\"conformance\", \"conformance, Serial specs\")")
	marker := flag.String("marker", "make-conformance", "the README's markers of this selection's line: <!-- MARKER:begin --> ... <!-- MARKER:end -->")
	previousPath := flag.String("previous", "", "the whole table of an earlier run of the same selection (docs/conformance/DATE.md): the summary compares this run with it, spec by spec")
	flag.Parse()
	if *leafPath == "" || *rootPath == "" || *summaryPath == "" || *fullPath == "" {
		flag.Usage()
		os.Exit(2)
	}
	leaf, err := readRun(*leafPath)
	if err != nil {
		log.Fatal(err)
	}
	root, err := readRun(*rootPath)
	if err != nil {
		log.Fatal(err)
	}
	exceptions, err := readExceptions(*exceptionsPath)
	if err != nil {
		log.Fatal(err)
	}
	specs := merge(leaf, root, exceptions)
	c := countOf(specs)
	rel, err := filepath.Rel(filepath.Dir(*summaryPath), *fullPath)
	if err != nil {
		log.Fatal(err)
	}
	page := summary(specs, c, *name, *title, *selection, rel, leaf.took, root.took)
	if *previousPath != "" {
		prev, err := readFull(*previousPath)
		if err != nil {
			log.Fatal(err)
		}
		prevRel, err := filepath.Rel(filepath.Dir(*summaryPath), *previousPath)
		if err != nil {
			log.Fatal(err)
		}
		page += compare(specs, prev, filepath.ToSlash(prevRel))
	}
	if err := os.WriteFile(*summaryPath, []byte(page), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(*fullPath), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*fullPath, []byte(full(specs, *title, *selection)), 0o644); err != nil {
		log.Fatal(err)
	}
	if *readmePath != "" {
		link, err := filepath.Rel(filepath.Dir(*readmePath), *summaryPath)
		if err != nil {
			log.Fatal(err)
		}
		if err := rewriteReadme(*readmePath, *marker, "Kubernetes "+c.line(*name), link); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(c.line(*name))
}

// readRun reads a ginkgo JSON report (a list of suite reports).
func readRun(path string) (run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return run{}, err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return run{}, fmt.Errorf("%s: %w", path, err)
	}
	r := run{results: map[string]result{}}
	for _, rep := range reports {
		r.took += rep.RunTime
		for _, s := range rep.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt {
				continue
			}
			switch {
			case s.State.Is(types.SpecStatePassed):
				r.results[s.FullText()] = result{state: "passed"}
			case s.State.Is(types.SpecStateFailureStates):
				r.results[s.FullText()] = result{state: "failed", reason: reasonOf(s)}
			}
		}
	}
	if len(r.results) == 0 {
		return run{}, fmt.Errorf("%s: no spec ran", path)
	}
	return r, nil
}

// reasonOf is the start of a failure's message, short enough for a table
// cell.
func reasonOf(s types.SpecReport) string {
	msg := s.Failure.Message
	if s.State.Is(types.SpecStateTimedout | types.SpecStateInterrupted | types.SpecStateAborted) {
		msg = s.State.String() + ": " + msg
	}
	// The first lines up to a sentence's worth: gomega's begin with a
	// bare "Expected".
	var first []string
	for line := range strings.SplitSeq(msg, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			first = append(first, line)
			if len(strings.Join(first, " ")) >= 60 {
				break
			}
		}
	}
	msg = strings.Join(first, " ")
	if r := []rune(msg); len(r) > 240 {
		msg = string(r[:240]) + "..."
	}
	return cell(msg)
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

// readExceptions reads "spec name<TAB>reason" lines; # starts a comment.
func readExceptions(path string) (map[string]string, error) {
	out := map[string]string{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, ok := strings.Cut(line, "\t")
		if !ok || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want the spec's name, a tab, and why the root cannot pass it", path, n)
		}
		out[name] = strings.TrimSpace(reason)
	}
	return out, sc.Err()
}

// merge lists every spec run at either side, by name.
func merge(leaf, root run, exceptions map[string]string) []spec {
	names := map[string]bool{}
	for n := range leaf.results {
		names[n] = true
	}
	for n := range root.results {
		names[n] = true
	}
	out := make([]spec, 0, len(names))
	for n := range names {
		out = append(out, spec{name: n, leaf: leaf.results[n], root: root.results[n], exception: exceptions[n]})
	}
	slices.SortFunc(out, func(a, b spec) int { return strings.Compare(a.name, b.name) })
	return out
}

// counts are the figures of a run.
type counts struct {
	specs, leafPassed, rootPassed, regressions, excepted int
}

func countOf(specs []spec) counts {
	var c counts
	for _, s := range specs {
		c.specs++
		if s.leaf.state == "passed" {
			c.leafPassed++
		}
		if s.root.state == "passed" {
			c.rootPassed++
		}
		if s.leaf.state == "passed" && s.root.state != "passed" {
			if s.exception != "" {
				c.excepted++
			} else {
				c.regressions++
			}
		}
	}
	return c
}

func (c counts) line(name string) string {
	return fmt.Sprintf("%s: %d specs run; passed at the leaf %d, at the root %d; failed at the root where the leaf passed %d, of which listed exceptions %d",
		name, c.specs, c.leafPassed, c.rootPassed, c.regressions+c.excepted, c.excepted)
}

func summary(specs []spec, c counts, name, title, selection, fullLink string, leafTook, rootTook time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s at the root\n\n", strings.ToUpper(name[:1])+name[1:])
	fmt.Fprintf(&b, "Generated by `make conformance` (hack/conformance.sh): the upstream Kubernetes e2e suite, built at the pinned version, run against one leaf of the demo tree directly (the baseline) and against its root, in the same run. Do not edit: run it again.\n\n")
	fmt.Fprintf(&b, "Run: %s. Specs: %s. Every spec of both runs, with its result at each side: [the whole table](%s).\n\n", title, selection, fullLink)
	fmt.Fprintf(&b, "| specs run | passed at the leaf | passed at the root | failed at the root where the leaf passed | of which listed exceptions | leaf run | root run |\n|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %s | %s |\n\n", c.specs, c.leafPassed, c.rootPassed, c.regressions+c.excepted, c.excepted,
		leafTook.Round(time.Second), rootTook.Round(time.Second))
	fmt.Fprintf(&b, "## Failed at the root\n\nEach spec the root did not pass, the leaf's result beside it, and why: the start of the suite's failure, or the listed exception's reason (hack/conformance/exceptions.txt).\n\n")
	b.WriteString("| spec | leaf | why |\n|---|---|---|\n")
	for _, s := range specs {
		if s.root.state == "passed" {
			continue
		}
		why := s.root.reason
		if s.root.state == "" {
			why = "not run at the root"
		}
		if s.exception != "" {
			why = "exception: " + cell(s.exception)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(s.name), stateOf(s.leaf), why)
	}
	return b.String()
}

// full lists every spec of the run by its results at the leaf and the root.
func full(specs []spec, title, selection string) string {
	groups := map[string][]string{}
	var order []string
	for _, s := range specs {
		g := "At the leaf " + stateOf(s.leaf) + ", at the root " + stateOf(s.root)
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], s.name)
	}
	slices.Sort(order)
	var b strings.Builder
	fmt.Fprintf(&b, "# Conformance run: %s\n\nGenerated by `make conformance`. Specs: %s. Every spec run, by its result at the leaf and at the root.\n", title, selection)
	for _, g := range order {
		fmt.Fprintf(&b, "\n## %s (%d)\n\n", g, len(groups[g]))
		for _, name := range groups[g] {
			fmt.Fprintf(&b, "- %s\n", strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(name))
		}
	}
	return b.String()
}

func stateOf(r result) string {
	if r.state == "" {
		return "not run"
	}
	return r.state
}

// rewriteReadme puts a line linking to link between the README's markers
// <!-- marker:begin --> and <!-- marker:end -->.
func rewriteReadme(path, marker, line, link string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	begin, end := "<!-- "+marker+":begin -->", "<!-- "+marker+":end -->"
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s ... %s markers", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n- [" + line + "](" + filepath.ToSlash(link) + ").\n" + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// previous is an earlier run as its whole table (full) wrote it: its title,
// and each spec's state at the leaf and the root ("passed", "failed", or ""
// for not run).
type previous struct {
	title      string
	leaf, root map[string]string
}

// readFull reads a page full wrote.
func readFull(path string) (previous, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return previous{}, err
	}
	p := previous{leaf: map[string]string{}, root: map[string]string{}}
	unescape := strings.NewReplacer("&lt;", "<", "&gt;", ">")
	var leafState, rootState string
	inGroup := false
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "# Conformance run: "):
			p.title = strings.TrimPrefix(line, "# Conformance run: ")
		case strings.HasPrefix(line, "## At the leaf "):
			// "## At the leaf passed, at the root not run (3)"
			g, _, _ := strings.Cut(strings.TrimPrefix(line, "## At the leaf "), " (")
			l, r, ok := strings.Cut(g, ", at the root ")
			if !ok {
				return previous{}, fmt.Errorf("%s: a group heading this tool does not write: %q", path, line)
			}
			leafState, rootState, inGroup = stateFrom(l), stateFrom(r), true
		case inGroup && strings.HasPrefix(line, "- "):
			name := unescape.Replace(strings.TrimPrefix(line, "- "))
			p.leaf[name], p.root[name] = leafState, rootState
		}
	}
	if len(p.leaf) == 0 {
		return previous{}, fmt.Errorf("%s: no spec listed: not a page this tool wrote", path)
	}
	return p, nil
}

func stateFrom(s string) string {
	if s == "not run" {
		return ""
	}
	return s
}

// compare says how this run differs from an earlier one of the same
// selection: both runs' counts, and each spec whose result changed at
// either side (a flaky spec, or one a change fixed or broke), with why it
// fails now where it does.
func compare(specs []spec, prev previous, prevLink string) string {
	var pc counts
	for name, l := range prev.leaf {
		pc.specs++
		if l == "passed" {
			pc.leafPassed++
		}
		if prev.root[name] == "passed" {
			pc.rootPassed++
		}
	}
	c := countOf(specs)
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Against the previous run\n\nThe same selection run before: [%s](%s). A spec whose result differs between the two runs at a side is listed below: run on the same code, it is flaky (why it failed is the failure's start); on different code, read both runs' commits.\n\n", cell(prev.title), prevLink)
	b.WriteString("| | specs run | passed at the leaf | passed at the root |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| this run | %d | %d | %d |\n| previous run | %d | %d | %d |\n\n", c.specs, c.leafPassed, c.rootPassed, pc.specs, pc.leafPassed, pc.rootPassed)
	type change struct{ name, leaf, root, why string }
	var changed []change
	seen := map[string]bool{}
	arrow := func(before, now string) string {
		if before == now {
			return stateOf(result{state: now})
		}
		return stateOf(result{state: before}) + " → " + stateOf(result{state: now})
	}
	for _, s := range specs {
		seen[s.name] = true
		pl, pr := prev.leaf[s.name], prev.root[s.name]
		if pl == s.leaf.state && pr == s.root.state {
			continue
		}
		var why []string
		if s.leaf.state == "failed" && pl != "failed" {
			why = append(why, "leaf now: "+s.leaf.reason)
		}
		if s.root.state == "failed" && pr != "failed" {
			why = append(why, "root now: "+s.root.reason)
		}
		changed = append(changed, change{s.name, arrow(pl, s.leaf.state), arrow(pr, s.root.state), strings.Join(why, "; ")})
	}
	for name := range prev.leaf {
		if !seen[name] {
			changed = append(changed, change{name, arrow(prev.leaf[name], ""), arrow(prev.root[name], ""), "not in this run's selection"})
		}
	}
	slices.SortFunc(changed, func(a, b change) int { return strings.Compare(a.name, b.name) })
	if len(changed) == 0 {
		b.WriteString("Every spec has the same result at both sides in both runs.\n")
		return b.String()
	}
	b.WriteString("| spec | leaf: before → now | root: before → now | why it fails now |\n|---|---|---|---|\n")
	for _, ch := range changed {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(ch.name), ch.leaf, ch.root, ch.why)
	}
	return b.String()
}
