#!/usr/bin/env bash
# Regenerates the deepcopy functions of api/ and the CRD manifests, with a
# pinned controller-gen built from the Go module proxy. The CRDs are written
# once, to charts/nestlet/crds, which the chart, the tests and the docs use.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

CONTROLLER_TOOLS_VERSION="v0.20.0"
CACHE_DIR="${NESTLET_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/nestlet}/bin/controller-gen/${CONTROLLER_TOOLS_VERSION}-$(go env GOVERSION)"
if [[ ! -x "${CACHE_DIR}/controller-gen" ]]; then
  echo "[codegen] building controller-gen ${CONTROLLER_TOOLS_VERSION} (first time)" >&2
  mkdir -p "${CACHE_DIR}"
  GOBIN="${CACHE_DIR}" go install "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}"
fi
"${CACHE_DIR}/controller-gen" object paths=./api/...
"${CACHE_DIR}/controller-gen" crd paths=./api/... output:crd:artifacts:config=charts/nestlet/crds
