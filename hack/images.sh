#!/usr/bin/env bash
# Builds Nestlet's image without Docker: every command of cmd/ (nestlet,
# nestlet-scheduler, nestlet-proxy, nestlet-routes, nestctl), static, under /usr/local/bin,
# run as the "nonroot" user 65532 with nothing else in the image (no shell,
# no package manager), as an OCI docker-archive that `ctr images import`,
# `docker load` and `kind load image-archive` read. The version (the
# chart's appVersion) and the commit are stamped into the binaries
# (pkg/version) and the image's labels. Reproducible: a rebuild of the same
# commit gives the same digest (static builds with -trimpath, no build
# paths or VCS stamps, fixed file times, no creation time).
#
#   hack/images.sh [OUT_DIR]     (default _output/images)
#
# NESTLET_VERSION replaces the version (a test's second build, to upgrade
# to); NESTLET_IMAGE the repository.
#
# The demo app's and pause's images are built with the node runtime
# (hack/install-node-runtime.sh), as the real nodes need them.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

out="$(mkdir -p "${1:-_output/images}" && cd "${1:-_output/images}" && pwd)"
version="${NESTLET_VERSION:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/nestlet/Chart.yaml)}"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain 2>/dev/null)" ]]; then
  revision="${revision}-dirty"
fi
image="${NESTLET_IMAGE:-ghcr.io/nestlet/nestlet}:${version}"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
ldflags="-s -w -X github.com/nestlet/nestlet/pkg/version.Version=${version} -X github.com/nestlet/nestlet/pkg/version.Revision=${revision}"
adds=()
for main in cmd/*/main.go; do
  cmd="$(basename "$(dirname "${main}")")"
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false -ldflags "${ldflags}" -o "${tmp}/${cmd}" "./cmd/${cmd}"
  adds+=(-add "${tmp}/${cmd}=/usr/local/bin/${cmd}")
done
(cd hack/images && go build -o "${tmp}/build-image" ./build-image)
"${tmp}/build-image" -name "${image}" -out "${out}/nestlet.tar" "${adds[@]}" \
  -entrypoint /usr/local/bin/nestlet -user 65532:65532 \
  -label "org.opencontainers.image.title=nestlet" \
  -label "org.opencontainers.image.version=${version}" \
  -label "org.opencontainers.image.revision=${revision}" \
  -label "org.opencontainers.image.source=https://github.com/nestlet/nestlet"
