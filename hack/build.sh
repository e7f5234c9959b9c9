#!/usr/bin/env bash
# Builds every package, and each command under cmd/ into _output/bin.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

go build ./...
mkdir -p _output/bin
for main in cmd/*/main.go; do
  [[ -e "${main}" ]] || continue
  go build -o "_output/bin/$(basename "$(dirname "${main}")")" "./$(dirname "${main}")"
done
