#!/usr/bin/env bash
# Sourced by hack/ scripts.

# nestlet::cache_dir prints where built tools and binaries are kept.
nestlet::cache_dir() {
  echo "${NESTLET_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME}/.cache}/nestlet}/bin"
}

# nestlet::go_tool NAME PACKAGE VERSION prints the path of a pinned Go tool,
# building it from the Go module proxy into the cache on first use.
nestlet::go_tool() {
  local name="$1" pkg="$2" version="$3"
  local dir
  dir="$(nestlet::cache_dir)/${name}/${version}-$(go env GOVERSION)"
  if [[ ! -x "${dir}/${name}" ]]; then
    echo "[hack] building ${name} ${version} (first time)" >&2
    mkdir -p "${dir}"
    GOBIN="${dir}" go install "${pkg}@${version}" >&2
  fi
  echo "${dir}/${name}"
}

# nestlet::kube_ldflags VERSION prints the -ldflags that stamp a Kubernetes
# binary built from the module proxy with its version, as the upstream
# release does (kube-apiserver, kubelet, ... report it to each other).
nestlet::kube_ldflags() {
  local version="$1"
  local minor="${version#v1.}"
  minor="${minor%%.*}"
  local pkg
  local flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=${version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
  echo "${flags}"
}

# nestlet::apt_need PACKAGE CHECK...: installs a Debian package unless CHECK
# succeeds; where it cannot (not root, not Debian), says what to install and
# fails.
nestlet::apt_need() {
  local pkg="$1"
  shift
  if "$@" >/dev/null 2>&1; then
    return
  fi
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "[hack] missing ${pkg}: install it (Debian: apt-get install ${pkg}) and run this again" >&2
    exit 1
  fi
  echo "[hack] installing ${pkg} (Debian package)" >&2
  apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkg}" >&2
}
