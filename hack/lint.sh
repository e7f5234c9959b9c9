#!/usr/bin/env bash
# Runs golangci-lint at a pinned version, built from the Go module proxy into
# the cache on first use.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
source hack/lib.sh

lint="$(nestlet::go_tool golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint v2.15.0)"
"${lint}" run ./...
