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
