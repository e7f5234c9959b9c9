#!/usr/bin/env bash
# Runs every benchmark (Go benchmarks under test/, against real local
# control planes) one package at a time, then prints one table: each
# metric, our figure, the baseline measured in the same run where one
# applies, and the ratio. The table is also written as JSON. Never timed
# assertions: figures are printed.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

mkdir -p _output
# The launcher builds nothing: our programs come from _output/bin.
hack/build.sh
go build -o _output/benchtable ./test/benchtable
# The real leaves' benchmarks (realleaf, recovery) need the node runtime,
# and, as in `make test`, fail rather than skip without it: a figure that
# silently has no row is what the table must never show.
hack/install-node-runtime.sh
export NESTLET_REQUIRE_REAL_NODES=1
mapfile -t pkgs < <(go list ./test/... | grep -v -e '/test/framework$' -e '/test/benchtable$')
# BENCH="scale faults" runs only the benchmarks of those packages (the last
# element of the package path: depth, faults, forward, join, kubelet,
# realleaf, recovery, scale, scheduler, ...).
if [[ -n "${BENCH:-}" ]]; then
  selected=()
  for p in "${pkgs[@]}"; do
    for want in ${BENCH}; do
      [[ "${p##*/}" == "${want}" ]] && selected+=("${p}")
    done
  done
  if [[ ${#selected[@]} -eq 0 ]]; then
    echo "BENCH=${BENCH} selects no package of test/" >&2
    exit 2
  fi
  pkgs=("${selected[@]}")
fi
# The processor's name is the one go test prints ("cpu: ..."): benchtable
# adds it, so that the table's header and the raw output say the same.
machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
names=()
for p in "${pkgs[@]}"; do names+=("${p##*/}"); done
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain 2>/dev/null)" ]]; then
  commit="${commit} with uncommitted changes"
fi
# A benchmark that fails does not stop the run: the table names it (its
# figures missing or partial) and the script exits non-zero at the end.
status=0
# The security benchmark writes its table of probes here (see below).
rm -f _output/probes.md
go test -count=1 -p 1 -run '^$' -bench . -benchtime 1x -timeout 120m "${pkgs[@]}" \
  | _output/benchtable -json _output/bench.json -md _output/bench.md -machine "${machine}" -commit "${commit}" -packages "${names[*]}" \
  | tee _output/bench.txt || status=$?
echo "figures saved in _output/bench.txt, _output/bench.json and _output/bench.md"
# The hostile child's probes (BenchmarkProbes), each with what was expected
# and what was seen: printed, and kept in docs/security.md between
# <!-- make-bench-probes:begin --> and <!-- make-bench-probes:end -->.
if [[ -s _output/probes.md ]]; then
  echo
  cat _output/probes.md
  {
    echo "Run of $(date -u +%Y-%m-%d), commit ${commit}, ${machine}:"
    echo
    cat _output/probes.md
  } > _output/probes-doc.md
  awk -v file=_output/probes-doc.md '
    /<!-- make-bench-probes:end -->/ { while ((getline line < file) > 0) print line; print ""; skip = 0 }
    !skip { print }
    /<!-- make-bench-probes:begin -->/ { print ""; skip = 1 }
  ' docs/security.md > _output/security.md.new
  if grep -q 'make-bench-probes:begin' docs/security.md; then
    mv _output/security.md.new docs/security.md
    echo "docs/security.md's table of probes is this run's"
  fi
fi
# A full run (every package) is the table of docs/performance.md, whole,
# and the README's headline rows (hack/bench-readme.sh); its table and
# output go into docs/bench, where docs/performance.md cites them.
if [[ -z "${BENCH:-}" ]]; then
  # A later run of the same day gets a letter (-b, -c, ...). Earlier runs
  # stay until nothing cites them; git keeps them after.
  name="$(date -u +%Y-%m-%d)-full"
  for letter in b c d e f g h i j k l m n o p q r s t u v w x y z; do
    [[ -e "docs/bench/${name}.md" ]] || break
    name="$(date -u +%Y-%m-%d)-full-${letter}"
  done
  cp _output/bench.md "docs/bench/${name}.md"
  cp _output/bench.txt "docs/bench/${name}.txt"
  hack/bench-readme.sh _output/bench.md
  echo "docs/performance.md's table and README.md's headline are this run's; docs/bench/${name}.{md,txt} keep it"
fi
if [[ ${status} -ne 0 ]]; then
  echo "some benchmarks failed (named in the table's first line): exit ${status}" >&2
fi
exit "${status}"
