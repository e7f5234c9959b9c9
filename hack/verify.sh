#!/usr/bin/env bash
# Fails when the tree is not as the tools would leave it: unformatted code,
# go vet findings, an untidy go.mod, a Kubernetes replace block that does
# not match k8s.io/kubernetes's own go.mod, or a tree that breaks the
# layout's contracts (hack/layoutcheck: forbidden imports between folders, a
# shipped binary that links the testing package, product files over 500
# lines or functions over 100).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

status=0
unformatted="$(gofmt -l $(git ls-files '*.go'))"
if [[ -n "${unformatted}" ]]; then
  echo "gofmt: these files need formatting:" >&2
  echo "${unformatted}" >&2
  status=1
fi

go vet ./...
(cd hack/etcd && go vet ./...)
(cd hack/images && go vet ./...)
(cd third_party/remotedialer && go vet ./...)
(cd hack/tools/conformance && go vet ./table && go test -count=1 ./table)

if ! go run ./hack/layoutcheck; then
  status=1
fi

# go.mod, go.sum, the replace block and generated code are regenerated and
# must not change.
hack/update-kube-pins.sh >/dev/null
mod_files=(go.mod go.sum hack/tools/conformance/go.mod hack/tools/conformance/go.sum)
for dir in hack/etcd hack/tools/helm hack/tools/metrics-server hack/tools/local-path-provisioner hack/tools/sample-apiserver hack/tools/containerd hack/tools/runc hack/tools/cni hack/images third_party/remotedialer; do
  (cd "${dir}" && go mod tidy)
  mod_files+=("${dir}/go.mod" "${dir}/go.sum")
done
if ! git diff --exit-code -- "${mod_files[@]}"; then
  echo "go.mod/go.sum are stale: run hack/update-kube-pins.sh and commit the result" >&2
  status=1
fi
hack/update-codegen.sh
generated=(api charts/nestlet/crds scheduler-plugins/apis)
if ! git diff --exit-code -- "${generated[@]}" || [[ -n "$(git ls-files --others --exclude-standard -- "${generated[@]}")" ]]; then
  echo "generated code is stale: run hack/update-codegen.sh and commit the result" >&2
  status=1
fi
exit "${status}"
