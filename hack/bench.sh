#!/usr/bin/env bash
# Runs every benchmark (Go benchmarks under test/, against real local
# control planes) one package at a time and prints the figures. Never timed
# assertions: figures are printed, and compared with baselines measured in
# the same run where one applies.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

mapfile -t pkgs < <(go list ./test/... | grep -v '/test/framework$')
mkdir -p _output
go test -count=1 -p 1 -run '^$' -bench . -benchtime 1x -timeout 60m "${pkgs[@]}" | tee _output/bench.txt
echo "figures saved in _output/bench.txt"
