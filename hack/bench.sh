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
go build -o _output/benchtable ./test/benchtable
mapfile -t pkgs < <(go list ./test/... | grep -v -e '/test/framework$' -e '/test/benchtable$')
go test -count=1 -p 1 -run '^$' -bench . -benchtime 1x -timeout 60m "${pkgs[@]}" \
  | _output/benchtable -json _output/bench.json | tee _output/bench.txt
echo "figures saved in _output/bench.txt and _output/bench.json"
