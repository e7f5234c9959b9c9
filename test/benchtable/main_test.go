package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

func TestParse(t *testing.T) {
	in := `goos: linux
BenchmarkJoin-2   	       1	        69.07 join-p50-ms	       116.7 join-p99-ms	         0 ns/op
BenchmarkSchedulerVsStock-2   	       1	       171.7 nestlet-pods/s	       145.5 stock-pods/s	         1.180 throughput-ratio
PASS
`
	r, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	rows := r.rows
	require.Empty(t, r.failed)
	require.Len(t, rows, 4)
	met := false // 69 ms, above the goal of 50
	require.Equal(t, Row{Benchmark: "Join", Metric: "join-p50-ms", Ours: ptr.To(69.07), Unit: "ms", Target: "<= 50", Met: &met}, rows[0])
	require.Equal(t, "nestlet-pods/s", rows[2].Metric)
	require.NotNil(t, rows[2].Baseline)
	require.InDelta(t, 145.5, *rows[2].Baseline, 1e-9)
	require.InDelta(t, 171.7/145.5, *rows[2].Ratio, 1e-9)
	require.Equal(t, "throughput-ratio", rows[3].Metric, "stock-pods/s is shown as a baseline, not a row")

	var out bytes.Buffer
	print(&out, rows)
	require.Contains(t, out.String(), "SchedulerVsStock  nestlet-pods/s")
	require.Contains(t, out.String(), "1.180")
}

// Targets are checked on the figure or on its ratio, said met or NOT met,
// and the Markdown table names the run and holds every row.
func TestTargets(t *testing.T) {
	in := `BenchmarkForwardingLatency-2   	1	700 e2e-2hop-p50-ms	400 direct-leaf-p50-ms	3 e2e-2hop-cpu-s
BenchmarkPartitions-2   	1	0 partition-watched-duplicates
BenchmarkJoin-2   	1	1500 join-p99-ms
`
	r, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	rows := r.rows
	require.Len(t, rows, 4)
	byMetric := map[string]Row{}
	for _, r := range rows {
		byMetric[r.Metric] = r
	}
	require.Equal(t, "ratio <= 1.5", byMetric["e2e-2hop-p50-ms"].Target)
	require.False(t, *byMetric["e2e-2hop-p50-ms"].Met, "1.75x the leaf's")
	require.Nil(t, byMetric["e2e-2hop-cpu-s"].Met, "no baseline in the run: cannot say")
	require.True(t, *byMetric["partition-watched-duplicates"].Met)
	require.False(t, *byMetric["join-p99-ms"].Met)

	var md strings.Builder
	markdown(&md, r, time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), "2 cores", "abc1234")
	out := md.String()
	require.NotContains(t, out, "Failed")
	require.Contains(t, out, "`make bench` of 2026-11-26 09:00 UTC on 2 cores, at commit abc1234")
	require.Contains(t, out, "| ForwardingLatency | e2e-2hop-p50-ms | 700 | 400 | 1.750 | ratio <= 1.5: NOT met |")
	require.Contains(t, out, "| ForwardingLatency | e2e-2hop-cpu-s | 3 | - | - | ratio <= 2.5: no baseline |")
	require.Contains(t, out, "| Join | join-p99-ms | 1500 | - | - | <= 1000: NOT met |")
	require.Equal(t, 2+len(rows), strings.Count(out, "\n| ")+1, "a header, a rule and a line per row")
}

// A benchmark that failed, and a package that failed without naming one
// (it did not build, or timed out), are named in the table's header: a
// failed run's figures are missing, never silently.
func TestFailuresNamed(t *testing.T) {
	in := `pkg: github.com/nestlet/nestlet/test/e2e/recovery
BenchmarkControlPlaneFaults-2   	1	0 watched-duplicates
PASS
ok  	github.com/nestlet/nestlet/test/e2e/recovery	253.652s
--- FAIL: BenchmarkFleet
    fleet_bench_test.go:278: root: 4466 of 10000 replicas Running after 20 minutes: it did not keep up
FAIL
exit status 1
FAIL	github.com/nestlet/nestlet/test/e2e/scale	2357.502s
FAIL	github.com/nestlet/nestlet/test/e2e/broken [build failed]
BenchmarkJoin-2   	1	69.07 join-p50-ms
ok  	github.com/nestlet/nestlet/test/e2e/join	10.1s
`
	r, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, r.rows, 2)
	require.Equal(t, []string{"Fleet (package scale)", "package broken"}, r.failed)
	var md strings.Builder
	markdown(&md, r, time.Date(2026, 11, 27, 12, 9, 0, 0, time.UTC), "2 cores", "abc1234")
	require.Contains(t, md.String(), "Failed in this run, its figures missing or partial: Fleet (package scale), package broken.\n")
}

// Every target of the packages that were to run has a row: one its
// benchmark did not print says why (failed, skipped, not run, said so by
// the benchmark), and a figure that is the quantile of an empty series
// (NaN) is not measured and fails the run, never a 0. The header names
// the processor go test names.
func TestEveryTargetHasARow(t *testing.T) {
	in := `goos: linux
cpu: Some Virtual Processor
pkg: github.com/nestlet/nestlet/test/e2e/join
BenchmarkJoin-2   	1	NaN join-p50-ms	120 join-p99-ms
ok  	github.com/nestlet/nestlet/test/e2e/join	10.1s
--- SKIP: BenchmarkRealStartup
    bench_test.go:40: the node runtime is missing
--- SKIP: BenchmarkEventsUp
    bench_api_test.go:40: the node runtime is missing
ok  	github.com/nestlet/nestlet/test/e2e/realleaf	0.1s
--- FAIL: BenchmarkFleet
    fleet_bench_test.go:300: NOT MEASURED tree-busiest-field-cpu-ms-per-pod: 1065 of 2000 replicas Running after 20 minutes
FAIL	github.com/nestlet/nestlet/test/e2e/scale	1200s
FAIL	github.com/nestlet/nestlet/test/e2e/faults	100s
`
	r, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	r.complete([]string{"join", "realleaf", "scale", "faults", "recovery"})
	byMetric := map[string]Row{}
	for _, row := range r.rows {
		byMetric[row.Metric] = row
	}
	require.Nil(t, byMetric["join-p50-ms"].Ours)
	require.Equal(t, "the quantile of an empty series", byMetric["join-p50-ms"].NotMeasured)
	require.Contains(t, r.failed, "Join (join-p50-ms measured nothing)")
	require.Equal(t, "BenchmarkAgentIdle did not print it", byMetric["agent-1-target-rss-MiB"].NotMeasured)
	require.Contains(t, byMetric["startup-ready-2hop-p99-ms"].NotMeasured, "RealStartup skipped: the node runtime is missing")
	require.Equal(t, "1065 of 2000 replicas Running after 20 minutes", byMetric["tree-busiest-field-cpu-ms-per-pod"].NotMeasured)
	require.Equal(t, "package faults failed", byMetric["soak-watched-duplicates"].NotMeasured)
	require.Equal(t, "package recovery did not run", byMetric["watched-duplicates"].NotMeasured)
	require.NotContains(t, byMetric, "e2e-2hop-p50-ms", "package forward was not selected")

	var md strings.Builder
	markdown(&md, r, time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), r.machine("2 cores, 24 GiB"), "abc1234")
	out := md.String()
	require.Contains(t, out, "on 2 cores, 24 GiB, Some Virtual Processor, at commit abc1234")
	require.Contains(t, out, "| Join | join-p50-ms | NOT MEASURED | - | - | <= 50: NOT MEASURED (the quantile of an empty series) |")
	require.Contains(t, out, "| Soak | soak-watched-duplicates | NOT MEASURED | - | - | <= 0: NOT MEASURED (package faults failed) |")
	_, err = json.Marshal(r.rows)
	require.NoError(t, err, "no NaN in the JSON")
}
