#!/usr/bin/env bash
# Regenerates the deepcopy functions of api/ and the CRD manifests, with a
# pinned controller-gen built from the Go module proxy. The CRDs are written
# once, to charts/nestlet/crds, which the chart, the tests and the docs use.
# Then the deepcopy functions, conversions and defaulters of the scheduler
# plugins' arguments (scheduler-plugins/apis/config), with k8s.io/code-generator
# at the version of k8s.io/apimachinery in go.mod, as kube-scheduler's own.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
source hack/lib.sh

controller_gen="$(nestlet::go_tool controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen v0.20.0)"
"${controller_gen}" object paths=./api/...
"${controller_gen}" crd paths=./api/... output:crd:artifacts:config=charts/nestlet/crds

codegen_version="$(go list -m -f '{{.Version}}' k8s.io/apimachinery)"
deepcopy_gen="$(nestlet::go_tool deepcopy-gen k8s.io/code-generator/cmd/deepcopy-gen "${codegen_version}")"
conversion_gen="$(nestlet::go_tool conversion-gen k8s.io/code-generator/cmd/conversion-gen "${codegen_version}")"
defaulter_gen="$(nestlet::go_tool defaulter-gen k8s.io/code-generator/cmd/defaulter-gen "${codegen_version}")"
plugin_args=./scheduler-plugins/apis/config
"${deepcopy_gen}" --go-header-file /dev/null --output-file zz_generated.deepcopy.go "${plugin_args}" "${plugin_args}/v1"
"${conversion_gen}" --go-header-file /dev/null --output-file zz_generated.conversion.go "${plugin_args}/v1"
"${defaulter_gen}" --go-header-file /dev/null --output-file zz_generated.defaults.go "${plugin_args}/v1"
