#!/usr/bin/env bash
# Runs the tests.
#
#   hack/test.sh          unit tests, then integration and end-to-end tests
#   hack/test.sh unit     unit tests only
#
# Unit tests are every package outside test/. Integration and end-to-end
# tests (test/...) start real control planes from _output/bin (see
# hack/install-binaries.sh) and run one package at a time: each starts its
# own clusters, and a 2-core machine has room for one topology at once.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

what="${1:-all}"
mapfile -t unit < <(go list ./... | grep -v '^github.com/nestlet/nestlet/test/')
mapfile -t real < <(go list ./test/... | grep -v -e '/test/framework$' -e '/test/benchtable$')

echo "== unit tests"
# Every package outside test/, and the unit tests of the framework and the
# benchmark table (no clusters).
# -vet=off: go vet runs over every package, tests included, in `make lint`
# (golangci-lint's govet), which CI runs before this; running it again per
# test package costs minutes on 2 cores.
go test -count=1 -vet=off "${unit[@]}" ./test/framework/... ./test/benchtable/...
# The image tools are a module of their own (hack/images).
(cd hack/images && go test -count=1 ./...)
# Upstream code carried with a patch (third_party/*/NESTLET.md).
(cd third_party/remotedialer && go test -count=1 ./...)

if [[ "${what}" == "unit" ]]; then
  exit 0
fi

echo "== build: the launcher runs our programs from _output/bin and builds nothing itself"
hack/build.sh

echo "== node runtime of the real leaves (kubelet, containerd, runc, CNI plugins, images)"
# Where it cannot be installed (not Linux, not root, no apt), the real-leaf
# tests skip and say why; .ci/run makes that a failure
# (NESTLET_REQUIRE_REAL_NODES=1).
if ! hack/install-node-runtime.sh; then
  echo "the node runtime could not be installed (see above): the real-leaf tests (test/e2e/realleaf) will skip" >&2
fi

echo "== the conformance suite's tools and images (test/e2e/tree runs a few of its specs at the root)"
# Built once at the pinned Kubernetes version and cached beside the other
# binaries (the first time about as long as make conformance's build).
# Where they cannot be built the test skips and says why; .ci/run makes
# that a failure.
conformance="${ROOT}/_output/conformance"
if hack/conformance.sh tools "${conformance}"; then
  export NESTLET_CONFORMANCE_TOOLS="${conformance}"
else
  echo "the conformance suite could not be built (see above): test/e2e/tree's conformance specs will skip" >&2
fi

echo "== integration and end-to-end tests (real control planes)"
# gotestsum prints what go test prints and keeps every event as JSON, from
# which the slowest tests are listed at the end: make test must stay
# within its time budget, and this says where the time goes.
gotestsum="$(source hack/lib.sh && nestlet::go_tool gotestsum gotest.tools/gotestsum v1.13.0)"
log="$(mktemp)"
trap 'rm -f "${log}"' EXIT
status=0
"${gotestsum}" --format standard-quiet --jsonfile "${log}" -- -count=1 -vet=off -p 1 -timeout 60m "${real[@]}" || status=$?
echo "== the slowest tests (30 s or more)"
"${gotestsum}" tool slowest --jsonfile "${log}" --threshold 30s || true
if grep -q "SKIPPING the real-leaf tests" "${log}"; then
  echo "== NOTE: the real-leaf tests were skipped: $(grep -o -m1 'SKIPPING the real-leaf tests: [^"\\]*' "${log}" | head -1 | sed 's/^SKIPPING the real-leaf tests: //')" >&2
fi
exit "${status}"
