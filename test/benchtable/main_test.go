package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	in := `goos: linux
BenchmarkJoin-2   	       1	        69.07 join-p50-ms	       116.7 join-p99-ms	         0 ns/op
BenchmarkSchedulerVsStock-2   	       1	       171.7 nestlet-pods/s	       145.5 stock-pods/s	         1.180 throughput-ratio
PASS
`
	rows, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, rows, 4)
	require.Equal(t, Row{Benchmark: "Join", Metric: "join-p50-ms", Ours: 69.07, Unit: "ms"}, rows[0])
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
