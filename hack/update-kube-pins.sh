#!/usr/bin/env bash
# Pins k8s.io/kubernetes and every k8s.io staging module to one Kubernetes
# release, with the replace block generated from k8s.io/kubernetes's own go.mod,
# in the project's module and in hack/tools/conformance (the upstream e2e
# suite that make conformance builds, at the same release).
#
#   hack/update-kube-pins.sh v1.35.4
#
# Upgrading Kubernetes is this one command followed by `make build test`.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

KUBE_VERSION="${1:-$(go list -m -f '{{.Version}}' k8s.io/kubernetes)}"
if [[ ! "${KUBE_VERSION}" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "usage: $0 v1.MINOR.PATCH (got ${KUBE_VERSION})" >&2
  exit 2
fi
STAGING_VERSION="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

kube_gomod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')"
if [[ ! -f "${kube_gomod}" ]]; then
  echo "could not download the go.mod of k8s.io/kubernetes@${KUBE_VERSION}" >&2
  exit 1
fi

# Every staging module is replaced by "./staging/src/k8s.io/<name>" upstream.
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*#\1#p' "${kube_gomod}" | sort -u)
if [[ ${#staging[@]} -eq 0 ]]; then
  echo "no staging replace lines found in ${kube_gomod}" >&2
  exit 1
fi

args=(-require "k8s.io/kubernetes@${KUBE_VERSION}")
for m in "${staging[@]}"; do
  args+=(-replace "${m}=${m}@${STAGING_VERSION}")
done
for dir in . hack/tools/conformance; do
  (cd "${dir}" && go mod edit "${args[@]}" && go mod tidy)
done
echo "pinned k8s.io/kubernetes ${KUBE_VERSION} and ${#staging[@]} staging modules at ${STAGING_VERSION}"
