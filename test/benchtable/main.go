// Command benchtable turns the output of `go test -bench` (standard input)
// into the table `make bench` prints: each metric with our figure, the
// baseline measured in the same run where one applies, and the ratio. It
// also writes the table as JSON (-json FILE). The input is passed through.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one line of the table.
type Row struct {
	Benchmark string `json:"benchmark"`
	Metric    string `json:"metric"`
	// Ours is nil when the figure was not measured (NotMeasured says why).
	Ours     *float64 `json:"ours"`
	Baseline *float64 `json:"baseline,omitempty"`
	Ratio    *float64 `json:"ratio,omitempty"`
	Unit     string   `json:"unit"`
	// Target is the goal the figure is held to, if any ("<= 300",
	// "ratio <= 1.5"), and Met whether this run met it.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	// NotMeasured says why a target has no figure in this run: its
	// benchmark failed, skipped or did not run, said so itself, or
	// reported the quantile of an empty series (NaN).
	NotMeasured string `json:"notMeasured,omitempty"`
}

// target is a goal: the figure (or its ratio to the baseline) at most or
// at least a value.
type target struct {
	ratio  bool
	atMost bool
	value  float64
	// bench and pkg name the benchmark that measures the figure and its
	// package (the last element of its path, as BENCH selects it), for
	// the row of a figure the run did not print.
	bench, pkg string
}

func (t target) String() string {
	op := ">="
	if t.atMost {
		op = "<="
	}
	if t.ratio {
		return fmt.Sprintf("ratio %s %g", op, t.value)
	}
	return fmt.Sprintf("%s %g", op, t.value)
}

// check returns whether r meets t, or nil when it cannot say (a ratio
// without a baseline).
func (t target) check(r Row) *bool {
	if r.Ours == nil {
		return nil
	}
	v := *r.Ours
	if t.ratio {
		if r.Ratio == nil {
			return nil
		}
		v = *r.Ratio
	}
	met := v >= t.value
	if t.atMost {
		met = v <= t.value
	}
	return &met
}

// targets are the goals of the figures that have one (the README and the
// issues that asked for them), by metric.
var targets = map[string]target{
	"join-p50-ms":                              {atMost: true, value: 50, bench: "Join", pkg: "join"},
	"join-p99-ms":                              {atMost: true, value: 1000, bench: "Join", pkg: "join"},
	"e2e-2hop-p50-ms":                          {ratio: true, atMost: true, value: 1.5, bench: "ForwardingLatency", pkg: "forward"},
	"e2e-2hop-p99-ms":                          {ratio: true, atMost: true, value: 1.5, bench: "ForwardingLatency", pkg: "forward"},
	"e2e-2hop-cpu-s":                           {ratio: true, atMost: true, value: 2.5, bench: "ForwardingLatency", pkg: "forward"},
	"own-cpu-e2e-2hop-p50-ms":                  {ratio: true, atMost: true, value: 1.5, bench: "ForwardingLatency", pkg: "forward"},
	"own-cpu-e2e-2hop-p99-ms":                  {ratio: true, atMost: true, value: 1.5, bench: "ForwardingLatency", pkg: "forward"},
	"deploy1000-3level-pods/s":                 {ratio: true, value: 0.7, bench: "Throughput1000", pkg: "forward"},
	"own-cpu-deploy1000-3level-pods/s":         {ratio: true, value: 0.7, bench: "Throughput1000", pkg: "forward"},
	"tree-vs-floor-cpu":                        {atMost: true, value: 1.15, bench: "Throughput1000", pkg: "forward"},
	"nestlet-share-of-tree-cpu":                {atMost: true, value: 0.10, bench: "Throughput1000", pkg: "forward"},
	"join60-requests-per-join-less-background": {atMost: true, value: 16, bench: "Join60AtOnce", pkg: "join"},
	"paced-per-hop-p50-ms":                     {atMost: true, value: 25, bench: "HopLatency", pkg: "depth"},
	"direct4-MiB/s":                            {ratio: true, value: 0.25, bench: "PodNetwork", pkg: "tree"},
	"direct4-added-p50-ms":                     {atMost: true, value: 1, bench: "PodNetwork", pkg: "tree"},
	"paced-3hop-p99-ms":                        {atMost: true, value: 300, bench: "HopLatency", pkg: "depth"},
	"throughput-ratio":                         {value: 0.95, bench: "SchedulerVsStock", pkg: "scheduler"},
	"latency-p50-ratio":                        {atMost: true, value: 1.2, bench: "SchedulerVsStock", pkg: "scheduler"},
	"paced-latency-p50-ratio":                  {atMost: true, value: 1.2, bench: "SchedulerVsStock", pkg: "scheduler"},
	"busiest-tree-cluster-vs-flat-cpu":         {atMost: true, value: 1.0, bench: "Throughput1000", pkg: "forward"},
	"tree-deploy-pods-failed":                  {atMost: true, value: 0, bench: "Fleet", pkg: "scale"},
	"e2e-2hop-pods-failed":                     {atMost: true, value: 0, bench: "ForwardingLatency", pkg: "forward"},
	"tree-busiest-field-cpu-ms-per-pod":        {ratio: true, atMost: true, value: 1.2, bench: "Fleet", pkg: "scale"},
	"startup-ready-2hop-p99-ms":                {atMost: true, value: 5000, bench: "RealStartup", pkg: "realleaf"},
	"startup-ready-added-1hop-p99-ms":          {atMost: true, value: 300, bench: "RealStartup", pkg: "realleaf"},
	"startup-ready-added-2hop-p99-ms":          {atMost: true, value: 600, bench: "RealStartup", pkg: "realleaf"},
	"ep-added-per-hop-p50-ms":                  {atMost: true, value: 100, bench: "EndpointPropagation", pkg: "forward"},
	"agent-1-target-rss-MiB":                   {atMost: true, value: 64, bench: "AgentIdle", pkg: "join"},
	"upgrade-pods-disturbed":                   {atMost: true, value: 0, bench: "Install", pkg: "install"},
	"partition-watched-duplicates":             {atMost: true, value: 0, bench: "Partitions", pkg: "faults"},
	"soak-watched-duplicates":                  {atMost: true, value: 0, bench: "Soak", pkg: "faults"},
	"watched-duplicates":                       {atMost: true, value: 0, bench: "ControlPlaneFaults", pkg: "recovery"},
	"watched-containers-twice":                 {atMost: true, value: 0, bench: "ControlPlaneFaults", pkg: "recovery"},
	"event-leaf-to-root-p99-ms":                {atMost: true, value: 5000, bench: "EventsUp", pkg: "realleaf"},
}

// baselines pairs a metric with the one measured as its baseline in the
// same run: same unit, "ours" first.
var baselines = map[string]string{
	"e2e-2hop-p50-ms":            "direct-leaf-p50-ms",
	"e2e-2hop-p99-ms":            "direct-leaf-p99-ms",
	"e2e-1hop-p50-ms":            "direct-leaf-p50-ms",
	"own-cpu-e2e-2hop-p50-ms":    "own-cpu-direct-leaf-p50-ms",
	"own-cpu-e2e-2hop-p99-ms":    "own-cpu-direct-leaf-p99-ms",
	"same-cores-e2e-2hop-p50-ms": "same-cores-direct-leaf-p50-ms",
	"same-cores-e2e-2hop-p99-ms": "same-cores-direct-leaf-p99-ms",
	"e2e-1hop-p99-ms":            "direct-leaf-p99-ms",
	"nestlet-pods/s":             "stock-pods/s",
	"hosts-tree-startup-ms":      "shared-tree-startup-ms",
	"hosts-rss-per-cluster-MiB":  "shared-rss-per-cluster-MiB",
	"hosts-leaf-rss-MiB":         "shared-leaf-rss-MiB",
	"nestlet-p50-ms":             "stock-p50-ms",
	"agent-pod-rss-MiB":          "agent-process-rss-MiB",
	"scheduler-pod-rss-MiB":      "scheduler-process-rss-MiB",
	"proxy-pod-rss-MiB":          "proxy-process-rss-MiB",
	"e2e-2hop-cpu-s":             "direct-cpu-s",
	"nestlet-p99-ms":             "stock-p99-ms",
	"nestlet-decision-p99-ms":    "stock-decision-p99-ms",
	"paced-nestlet-p50-ms":       "paced-stock-p50-ms",
	"paced-nestlet-p99-ms":       "paced-stock-p99-ms",

	"logs-first-byte-2hop-p50-ms": "logs-first-byte-leaf-p50-ms",
	"logs-first-byte-2hop-p99-ms": "logs-first-byte-leaf-p99-ms",
	"exec-2hop-p50-ms":            "exec-leaf-p50-ms",
	"exec-2hop-p99-ms":            "exec-leaf-p99-ms",

	"paced-1hop-p50-ms": "paced-0hop-p50-ms",
	"paced-1hop-p99-ms": "paced-0hop-p99-ms",
	"paced-2hop-p50-ms": "paced-0hop-p50-ms",
	"paced-2hop-p99-ms": "paced-0hop-p99-ms",
	"paced-3hop-p50-ms": "paced-0hop-p50-ms",
	"paced-3hop-p99-ms": "paced-0hop-p99-ms",

	"paced-per-hop-p50-ms": "bindfirst-per-hop-p50-ms",

	"tunnel4-p50-ms": "leaf-p50-ms",
	"tunnel4-p99-ms": "leaf-p99-ms",
	"tunnel4-MiB/s":  "leaf-MiB/s",
	"tunnel2-p50-ms": "leaf-p50-ms",
	"tunnel2-p99-ms": "leaf-p99-ms",
	"tunnel2-MiB/s":  "leaf-MiB/s",
	"direct4-p50-ms": "leaf-p50-ms",
	"direct4-p99-ms": "leaf-p99-ms",
	"direct4-MiB/s":  "leaf-MiB/s",
	"direct2-p50-ms": "leaf-p50-ms",
	"direct2-p99-ms": "leaf-p99-ms",
	"direct2-MiB/s":  "leaf-MiB/s",

	"delete-1hop-p50-ms": "delete-0hop-p50-ms",
	"delete-1hop-p99-ms": "delete-0hop-p99-ms",
	"delete-2hop-p50-ms": "delete-0hop-p50-ms",
	"delete-2hop-p99-ms": "delete-0hop-p99-ms",
	"delete-3hop-p50-ms": "delete-0hop-p50-ms",
	"delete-3hop-p99-ms": "delete-0hop-p99-ms",

	"ep-1hop-p50-ms": "ep-leaf-p50-ms",
	"ep-1hop-p99-ms": "ep-leaf-p99-ms",
	"ep-2hop-p50-ms": "ep-leaf-p50-ms",
	"ep-2hop-p99-ms": "ep-leaf-p99-ms",

	"tree-root-all-running-ms":            "flat-all-running-ms",
	"tree-root-sched-p50-ms":              "flat-sched-p50-ms",
	"tree-root-sched-p99-ms":              "flat-sched-p99-ms",
	"tree-root-apiserver-idle-rss-MiB":    "flat-apiserver-idle-rss-MiB",
	"tree-root-apiserver-peak-rss-MiB":    "flat-apiserver-peak-rss-MiB",
	"tree-root-cpu-ms-per-pod":            "flat-cpu-ms-per-pod",
	"tree-busiest-field-cpu-ms-per-pod":   "flat-cpu-ms-per-pod",
	"tree-root-requests-per-pod":          "flat-requests-per-pod",
	"tree-busiest-field-requests-per-pod": "flat-requests-per-pod",
	"tree-whole-machine-cpu-ms-per-pod":   "flat-whole-machine-cpu-ms-per-pod",

	"startup-running-1hop-p50-ms": "startup-running-0hop-p50-ms",
	"startup-running-1hop-p99-ms": "startup-running-0hop-p99-ms",
	"startup-running-2hop-p50-ms": "startup-running-0hop-p50-ms",
	"startup-running-2hop-p99-ms": "startup-running-0hop-p99-ms",
	"startup-ready-1hop-p50-ms":   "startup-ready-0hop-p50-ms",
	"startup-ready-1hop-p99-ms":   "startup-ready-0hop-p99-ms",
	"startup-ready-2hop-p50-ms":   "startup-ready-0hop-p50-ms",
	"startup-ready-2hop-p99-ms":   "startup-ready-0hop-p99-ms",

	"pod-api-root-2hop-p50-ms": "pod-api-leaf-p50-ms",
	"pod-api-root-2hop-p99-ms": "pod-api-leaf-p99-ms",

	"deploy1000-3level-ms":     "deploy1000-flat-ms",
	"deploy1000-3level-pods/s": "deploy1000-flat-pods/s",

	"own-cpu-deploy1000-3level-ms":     "own-cpu-deploy1000-flat-ms",
	"own-cpu-deploy1000-3level-pods/s": "own-cpu-deploy1000-flat-pods/s",
}

func main() {
	jsonOut := flag.String("json", "", "write the table as JSON to this file")
	mdOut := flag.String("md", "", "write the table as Markdown to this file")
	machine := flag.String("machine", "", "the machine the run was on (cores, memory), for -md; the CPU's name is the one go test prints")
	commit := flag.String("commit", "", "the commit the run measured, for -md")
	at := flag.String("time", "", "when the run ended (RFC 3339), for a table made again from a saved run's output; default now")
	selected := flag.String("packages", "", "the packages the run selected (the last elements of their paths, space-separated): "+
		"a target of another package has no row; default every package")
	flag.Parse()
	when := time.Now()
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable: -time:", err)
			os.Exit(2)
		}
		when = t
	}
	r, err := parse(io.TeeReader(os.Stdin, os.Stdout))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	r.complete(strings.Fields(*selected))
	print(os.Stdout, r.rows)
	for _, f := range r.failed {
		fmt.Fprintf(os.Stdout, "FAILED: %s (its figures are missing or partial)\n", f)
	}
	if *mdOut != "" {
		var b strings.Builder
		markdown(&b, r, when, r.machine(*machine), *commit)
		if err := os.WriteFile(*mdOut, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(map[string]any{"time": when.UTC().Format(time.RFC3339), "machine": r.machine(*machine),
			"rows": r.rows, "failed": r.failed}, "", "  ")
		if err == nil {
			err = os.WriteFile(*jsonOut, data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(1)
		}
	}
	if len(r.failed) > 0 {
		os.Exit(1)
	}
}

// run is what one `go test -bench` output holds.
type run struct {
	rows []Row
	// failed names what failed: a benchmark, a package that failed
	// without naming one (it did not build, or timed out), a figure that
	// was the quantile of an empty series.
	failed []string
	// cpu is the processor go test names ("cpu: ..."): the table's
	// header says the same as the raw output.
	cpu string
	// ran holds the packages that printed a result (ok or FAIL), failedPkg
	// those that failed, skipped a package's benchmarks that skipped and
	// why, and said the figures a benchmark said it could not measure
	// ("NOT MEASURED <metric>: <why>" in its log).
	ran, failedPkg map[string]bool
	skipped        map[string][]string
	said           map[string]string
}

// machine is the table's description of the machine: the CPU go test
// named, then what hack/bench.sh gave (cores, memory).
func (r *run) machine(given string) string {
	switch {
	case r.cpu == "":
		return given
	case given == "":
		return r.cpu
	}
	return given + ", " + r.cpu
}

// parse reads benchmark result lines: "BenchmarkX-2  1  v1 unit1  v2 unit2
// ...", and what failed: each "--- FAIL: BenchmarkX" and each package
// "FAIL <package>" in which no benchmark was named as failing (one that
// failed to build, or timed out), in the order go test printed them.
func parse(in io.Reader) (*run, error) {
	r := &run{ran: map[string]bool{}, failedPkg: map[string]bool{}, skipped: map[string][]string{}, said: map[string]string{}}
	isBaseline := map[string]bool{}
	for _, b := range baselines {
		isBaseline[b] = true
	}
	var failedHere []string
	var skipping string // the benchmark whose skip reason comes next
	var skips []string  // this package's skipped benchmarks, with why
	s := bufio.NewScanner(in)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		f := strings.Fields(line)
		if skipping != "" {
			why := "no reason given"
			if len(f) > 0 && strings.HasPrefix(line, " ") {
				why = strings.Join(f[1:], " ")
			}
			skips = append(skips, skipping+" skipped: "+why)
			skipping = ""
		}
		if i := strings.Index(line, "NOT MEASURED "); i >= 0 {
			if metric, why, ok := strings.Cut(line[i+len("NOT MEASURED "):], ": "); ok {
				r.said[strings.TrimSpace(metric)] = strings.TrimSpace(why)
			}
		}
		switch {
		case strings.HasPrefix(line, "cpu: ") && r.cpu == "":
			r.cpu = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
			continue
		case len(f) >= 3 && f[0] == "---" && f[1] == "SKIP:" && strings.HasPrefix(f[2], "Benchmark"):
			skipping = strings.TrimPrefix(f[2], "Benchmark")
			continue
		case len(f) >= 3 && f[0] == "---" && f[1] == "FAIL:" && strings.HasPrefix(f[2], "Benchmark"):
			failedHere = append(failedHere, strings.TrimPrefix(f[2], "Benchmark"))
			continue
		case len(f) >= 2 && (f[0] == "FAIL" || f[0] == "ok"):
			pkg := f[1]
			if i := strings.LastIndex(pkg, "/"); i >= 0 {
				pkg = pkg[i+1:]
			}
			r.ran[pkg] = true
			r.skipped[pkg] = append(r.skipped[pkg], skips...)
			skips = nil
			if f[0] == "ok" {
				failedHere = nil
				continue
			}
			r.failedPkg[pkg] = true
			if len(failedHere) == 0 {
				r.failed = append(r.failed, "package "+pkg)
			}
			for _, b := range failedHere {
				r.failed = append(r.failed, b+" (package "+pkg+")")
			}
			failedHere = nil
			continue
		}
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
		name = strings.TrimPrefix(name, "Benchmark")
		metrics := map[string]float64{}
		var order []string
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q: %w", name, f[i], err)
			}
			if f[i+1] == "ns/op" {
				continue
			}
			metrics[f[i+1]] = v
			order = append(order, f[i+1])
		}
		for _, m := range order {
			if isBaseline[m] {
				continue
			}
			row := Row{Benchmark: name, Metric: m, Unit: unit(m)}
			if v := metrics[m]; math.IsNaN(v) {
				row.NotMeasured = "the quantile of an empty series"
				r.failed = append(r.failed, fmt.Sprintf("%s (%s measured nothing)", name, m))
			} else {
				row.Ours = &v
			}
			if b, ok := baselines[m]; ok && row.Ours != nil {
				if bv, ok := metrics[b]; ok && !math.IsNaN(bv) {
					row.Baseline = &bv
					if bv != 0 {
						ratio := *row.Ours / bv
						row.Ratio = &ratio
					}
				}
			}
			if t, ok := targets[m]; ok {
				row.Target, row.Met = t.String(), t.check(row)
			}
			r.rows = append(r.rows, row)
		}
	}
	return r, s.Err()
}

// complete adds a row for each target of the selected packages (all when
// none is given) that has none, saying why it was not measured.
func (r *run) complete(selected []string) {
	have := map[string]bool{}
	for _, row := range r.rows {
		have[row.Metric] = true
	}
	var missing []string
	for m, t := range targets {
		if !have[m] && (len(selected) == 0 || slices.Contains(selected, t.pkg)) {
			missing = append(missing, m)
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t := targets[m]
		why := r.said[m]
		switch {
		case why != "":
		case r.failedPkg[t.pkg]:
			why = "package " + t.pkg + " failed"
		case len(r.skipped[t.pkg]) > 0:
			why = strings.Join(r.skipped[t.pkg], "; ")
		case !r.ran[t.pkg]:
			why = "package " + t.pkg + " did not run"
		default:
			why = "Benchmark" + t.bench + " did not print it"
		}
		r.rows = append(r.rows, Row{Benchmark: t.bench, Metric: m, Unit: unit(m), Target: t.String(), NotMeasured: why})
	}
}

func unit(metric string) string {
	switch {
	case strings.HasSuffix(metric, "-ms"):
		return "ms"
	case strings.HasSuffix(metric, "/s"):
		return "per second"
	}
	return ""
}

func print(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nbenchmark\tmetric\tours\tbaseline (same run)\tratio\ttarget")
	for _, r := range rows {
		c := cells(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Benchmark, r.Metric, c.ours, c.base, c.ratio, c.target)
	}
	_ = tw.Flush()
}

type rowCells struct{ ours, base, ratio, target string }

// cells formats a row's figures.
func cells(r Row) rowCells {
	c := rowCells{ours: "NOT MEASURED", base: "-", ratio: "-", target: "-"}
	if r.Ours != nil {
		c.ours = strconv.FormatFloat(*r.Ours, 'g', 6, 64)
	}
	if r.Baseline != nil {
		c.base = strconv.FormatFloat(*r.Baseline, 'g', 6, 64)
	}
	if r.Ratio != nil {
		c.ratio = strconv.FormatFloat(*r.Ratio, 'f', 3, 64)
	}
	if r.Target != "" {
		switch {
		case r.NotMeasured != "":
			c.target = r.Target + ": NOT MEASURED (" + r.NotMeasured + ")"
		case r.Met == nil:
			c.target = r.Target + ": no baseline"
		case *r.Met:
			c.target = r.Target + ": met"
		default:
			c.target = r.Target + ": NOT met"
		}
	}
	return c
}

// markdown writes rows as one Markdown table under a line naming the run:
// when, on what machine, at which commit, and what failed in it.
func markdown(w io.Writer, r *run, when time.Time, machine, commit string) {
	rows := r.rows
	fmt.Fprintf(w, "`make bench` of %s on %s, at commit %s: every figure it measured.", when.UTC().Format("2006-01-02 15:04 MST"), machine, commit)
	if len(r.failed) > 0 {
		fmt.Fprintf(w, " Failed in this run, its figures missing or partial: %s.", strings.Join(r.failed, ", "))
	}
	fmt.Fprint(w, "\n\n")
	fmt.Fprintln(w, "| benchmark | metric | ours | baseline (same run) | ratio | target |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		c := cells(r)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Benchmark, r.Metric, c.ours, c.base, c.ratio, c.target)
	}
	fmt.Fprintln(w)
}
