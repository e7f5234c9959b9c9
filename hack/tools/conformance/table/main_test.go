package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareWithThePreviousRun reads back the whole table full writes and
// lists exactly the specs whose result changed at a side.
func TestCompareWithThePreviousRun(t *testing.T) {
	before := []spec{
		{name: "a <x>", leaf: result{state: "passed"}, root: result{state: "passed"}},
		{name: "b", leaf: result{state: "passed"}, root: result{state: "failed", reason: "old"}},
		{name: "c", leaf: result{state: "failed"}, root: result{state: "failed"}},
		{name: "gone", leaf: result{state: "passed"}, root: result{state: "passed"}},
	}
	path := filepath.Join(t.TempDir(), "before.md")
	if err := os.WriteFile(path, []byte(full(before, "day one, commit abc", "labels x")), 0o644); err != nil {
		t.Fatal(err)
	}
	prev, err := readFull(path)
	if err != nil {
		t.Fatal(err)
	}
	if prev.title != "day one, commit abc" || prev.leaf["a <x>"] != "passed" || prev.root["b"] != "failed" || len(prev.leaf) != 4 {
		t.Fatalf("read back %+v", prev)
	}
	now := []spec{
		{name: "a <x>", leaf: result{state: "passed"}, root: result{state: "failed", reason: "timed out"}},
		{name: "b", leaf: result{state: "passed"}, root: result{state: "failed", reason: "still"}},
		{name: "c", leaf: result{state: "failed"}, root: result{state: "failed"}},
		{name: "new", leaf: result{state: "passed"}, root: result{state: "passed"}},
	}
	got := compare(now, prev, "before.md")
	for _, want := range []string{
		"| this run | 4 | 3 | 1 |",
		"| previous run | 4 | 3 | 2 |",
		"| a &lt;x&gt; | passed | passed → failed | root now: timed out |",
		"| gone | passed → not run | passed → not run | not in this run's selection |",
		"| new | not run → passed | not run → passed |  |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	for _, unchanged := range []string{"| b |", "| c |"} {
		if strings.Contains(got, unchanged) {
			t.Errorf("%q listed though its results are the same:\n%s", unchanged, got)
		}
	}
	if got := compare(before[:3], prev, "before.md"); !strings.Contains(got, "| gone |") {
		t.Errorf("a spec of the previous run missing now is not listed:\n%s", got)
	}
	same := compare(before, prev, "before.md")
	if !strings.Contains(same, "Every spec has the same result") {
		t.Errorf("identical runs:\n%s", same)
	}
}
