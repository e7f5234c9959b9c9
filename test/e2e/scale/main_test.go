// Package scale benchmarks the Gaia paper's topology: one root, two field
// clusters and 120 leaf clusters. Root and fields are real control planes
// from pkg/localcluster, each with a real nestlet agent; the 120 leaves are
// hollow children (test/hollow): real agents, in this process, against the
// fields' real API servers, over simulated clusters.
//
//	root <- field-a, field-b          (real)
//	field-a <- 60 hollow leaves       (region field-a, one zone per leaf)
//	field-b <- 60 hollow leaves       (region field-b, one zone per leaf)
//
//	go test ./test/e2e/scale -run '^$' -bench . -benchtime 1x -timeout 30m
//
// The clusters start only when the benchmark is selected (-test.bench
// matches it): `go test ./test/...` without -bench starts nothing here.
package scale

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nestlet/nestlet/pkg/localcluster"
	"github.com/nestlet/nestlet/test/framework"
)

// env is the started root and fields (nil when only tests run).
var env *framework.TreeEnv

func TestMain(m *testing.M) {
	flag.Parse()
	if !benchSelected("BenchmarkHollow120") {
		os.Exit(m.Run())
	}
	os.Exit(framework.RunTreeMain(m, framework.Tree{
		Clusters: []localcluster.ClusterOptions{{Name: "root"}, {Name: "field-a"}, {Name: "field-b"}},
		Edges:    [][2]string{{"field-a", "root"}, {"field-b", "root"}},
		JoinArgs: []string{"--report-frequency=3s"},
	}, func(te *framework.TreeEnv) { env = te }))
}

// benchSelected reports whether -test.bench selects benchmark name.
func benchSelected(name string) bool {
	f := flag.Lookup("test.bench")
	if f == nil || f.Value.String() == "" {
		return false
	}
	pattern, _, _ := strings.Cut(f.Value.String(), "/")
	ok, err := regexp.MatchString(pattern, name)
	return err == nil && ok
}
