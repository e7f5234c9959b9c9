#!/usr/bin/env bash
# Runs golangci-lint at a pinned version, built from the Go module proxy into
# the cache on first use.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

GOLANGCI_LINT_VERSION="v2.15.0"
CACHE_DIR="${NESTLET_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/nestlet}/bin/golangci-lint/${GOLANGCI_LINT_VERSION}-$(go env GOVERSION)"
if [[ ! -x "${CACHE_DIR}/golangci-lint" ]]; then
  echo "[lint] building golangci-lint ${GOLANGCI_LINT_VERSION} (first time)" >&2
  mkdir -p "${CACHE_DIR}"
  GOBIN="${CACHE_DIR}" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
fi
"${CACHE_DIR}/golangci-lint" run ./...
