#!/usr/bin/env bash
# Regenerates the deepcopy functions of api/ and the CRD manifests, with a
# pinned controller-gen built from the Go module proxy. The CRDs are written
# once, to charts/nestlet/crds, which the chart, the tests and the docs use.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
source hack/lib.sh

controller_gen="$(nestlet::go_tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen v0.20.0)"
"${controller_gen}" object paths=./api/...
"${controller_gen}" crd paths=./api/... output:crd:artifacts:config=charts/nestlet/crds
