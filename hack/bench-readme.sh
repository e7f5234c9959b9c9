#!/usr/bin/env bash
# Puts the figures of one `make bench` run, the table test/benchtable
# writes with -md, where the documentation shows them. hack/bench.sh runs
# it after a full run. Nothing between the markers is written by hand.
#
#   hack/bench-readme.sh _output/bench.md
#   hack/bench-readme.sh docs/bench/2026-11-28-full.md   # an earlier run again
#
# - docs/performance.md, between <!-- make-bench:begin --> and
#   <!-- make-bench:end -->: every row of the table, under its first line
#   (the run's date, machine and commit), one table per benchmark under a
#   heading of the benchmark's name, so that prose links a metric to its
#   benchmark's rows (performance.md#join), "-" cells left empty and empty
#   cells at the end of a row left out, so that the page stays readable
#   and under the docs' size limit;
# - README.md, between <!-- make-bench-headline:begin --> and
#   <!-- make-bench-headline:end -->: the same first line, shortened, the
#   table's header and the rows of the HEADLINE metrics below, as the
#   table has them.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
table="${1:?usage: hack/bench-readme.sh TABLE.md}"
performance="${ROOT}/docs/performance.md"
readme="${ROOT}/README.md"

# The README's headline: at most six rows, "benchmark metric", in the
# order shown, each held to a target, met or not: a join; a burst through
# two levels against one cluster, on this machine's shared cores and with
# each cluster on a core share of its own; a large deployment through
# three levels against one cluster; a real pod's start-up two levels down;
# what an agent costs at rest.
HEADLINE=(
  "Join join-p50-ms"
  "ForwardingLatency e2e-2hop-p50-ms"
  "ForwardingLatency own-cpu-e2e-2hop-p50-ms"
  "Throughput1000 deploy1000-3level-pods/s"
  "RealStartup startup-ready-2hop-p99-ms"
  "AgentIdle agent-1-target-rss-MiB"
)

# check_markers FILE BEGIN END: both lines present, once each.
check_markers() {
  local marker
  for marker in "$2" "$3"; do
    if [[ "$(grep -cxF -- "${marker}" "$1")" != 1 ]]; then
      echo "${1#"${ROOT}/"} must hold the line ${marker} exactly once" >&2
      exit 1
    fi
  done
}

# replace FILE BEGIN END CONTENT: CONTENT's lines in place of those between
# BEGIN and END.
replace() {
  local tmp
  tmp="$(mktemp)"
  awk -v begin="$2" -v end="$3" -v content="$4" '
    $0 == begin { print; while ((getline line < content) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }
  ' "$1" > "${tmp}"
  mv "${tmp}" "$1"
}

check_markers "${performance}" '<!-- make-bench:begin -->' '<!-- make-bench:end -->'
check_markers "${readme}" '<!-- make-bench-headline:begin -->' '<!-- make-bench-headline:end -->'
if ! head -n 1 "${table}" | grep -q '^`make bench` of '; then
  echo "${table} is not a table written by test/benchtable -md" >&2
  exit 1
fi

grouped="$(mktemp)"
headline="$(mktemp)"
trap 'rm -f "${grouped}" "${headline}"' EXIT

# The whole table, one benchmark at a time.
awk '
  NR == 1 { print; next }
  /^\| benchmark \|/ || /^\|---/ || !/^\| / { next }
  {
    n = split($0, cell, /[ ]*\|[ ]*/)
    # cell[1] is empty (before the first |), cell[n] too (after the last).
    if (cell[2] != current) {
      current = cell[2]
      printf "\n### %s\n\n| metric | ours | baseline | ratio | target |\n|---|---|---|---|---|\n", current
    }
    # Cells after the last one that holds something are left out, as
    # GitHub tables allow: most rows have no baseline and no target.
    last = 4
    for (i = 5; i < n; i++) if (cell[i] != "-") last = i
    line = "|"
    for (i = 3; i <= last; i++) line = line " " (cell[i] == "-" ? "" : cell[i] " ") "|"
    print line
  }
' "${table}" > "${grouped}"
echo >> "${grouped}"

# The headline: the run's first line (less "every figure it measured",
# true of the full table only), the header, the chosen rows.
{
  head -n 1 "${table}" | sed 's/: every figure it measured\./\./'
  echo
  grep -m 2 -E '^\| benchmark \||^\|---' "${table}"
  for entry in "${HEADLINE[@]}"; do
    row="$(awk -v b="${entry%% *}" -v m="${entry#* }" -F ' [|] ' '
      $1 == "| " b && $2 == m { print; exit }
    ' "${table}")"
    if [[ -z "${row}" ]]; then
      echo "hack/bench-readme.sh: no row ${entry} in ${table}; the README shows the others" >&2
      continue
    fi
    echo "${row}"
  done
} > "${headline}"

replace "${performance}" '<!-- make-bench:begin -->' '<!-- make-bench:end -->' "${grouped}"
replace "${readme}" '<!-- make-bench-headline:begin -->' '<!-- make-bench-headline:end -->' "${headline}"
