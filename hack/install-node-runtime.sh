#!/usr/bin/env bash
# Builds the node runtime of real leaves (issue "real leaves"), pinned and
# from the Go module proxy only, into the cache, and links it into
# _output/bin/node (git-ignored):
#
#   kubelet, kube-proxy           k8s.io/kubernetes at the version pinned in go.mod (as the control plane;
#                                 kube-proxy only for the one real node of a host that asks for it)
#   containerd, ctr,
#   containerd-shim-runc-v2       hack/tools/containerd/go.mod (github.com/containerd/containerd/v2)
#   runc                          hack/tools/runc/go.mod (github.com/opencontainers/runc; cgo, static, with seccomp)
#   cni/{bridge,host-local,
#        loopback,portmap}        hack/tools/cni/go.mod (github.com/containernetworking/plugins)
#   coredns                       hack/tools/coredns (CoreDNS's main with a cluster DNS's plugins,
#                                 at the version kubeadm installs with Kubernetes 1.35)
#   images/pause.tar,             OCI images without a registry, built from hack/images (Go programs,
#   images/demo-app.tar,          go-containerregistry): nestlet.local/pause:v1 (the sandbox),
#   images/coredns.tar,           nestlet.local/demo-app:v1 (see hack/images/demo-app),
#   images/volume-helper.tar      nestlet.local/volume-helper:v1 (local-path-provisioner's helper) and
#                                 nestlet.local/coredns:<version> (the cluster DNS); imported
#                                 into each real node's containerd by the launcher
#
# Why built rather than Debian's packages: kubelet 1.35 asks the runtime for
# its cgroup driver (the CRI RuntimeConfig call, which containerd has from
# 2.0 on) and marks runtimes without it as losing support in 1.36;
# containerd's own support table lists 2.2.0+, 2.1.5+ and 1.7.28+ for
# Kubernetes 1.35, and Debian 12 ships containerd 1.6.20, runc 1.1.5 and CNI
# plugins 1.1.1 (no nftables backend). runc is the version containerd
# 2.2's script/setup/runc-version names; the CNI plugins the version in
# containerd's go.mod.
#
# Debian packages it needs, installed when missing (as root): libseccomp-dev
# (to build runc) and nftables (the `nft` binary the CNI plugins' nftables
# backends call; the machine has no iptables).
#
# Idempotent: a binary already in the cache is not built again.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
source hack/lib.sh

CACHE_DIR="$(nestlet::cache_dir)"
OUT_DIR="${ROOT}/_output/bin/node"
GO_VERSION="$(go env GOVERSION)"
mkdir -p "${CACHE_DIR}" "${OUT_DIR}/cni"

log() { printf '[install-node-runtime] %s\n' "$*" >&2; }

if [[ "$(uname -s)" != Linux ]]; then
  log "real leaves need Linux (kubelet, containerd and runc); this is $(uname -s)"
  exit 1
fi

nestlet::apt_need libseccomp-dev test -e /usr/include/seccomp.h
nestlet::apt_need nftables command -v nft
# Hosts of their own for every cluster (launcher.NetworkHosts): ip and nsenter.
nestlet::apt_need iproute2 command -v ip
nestlet::apt_need util-linux command -v nsenter

module_version() { # DIR MODULE
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

KUBE_VERSION="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
CONTAINERD_VERSION="$(module_version hack/tools/containerd github.com/containerd/containerd/v2)"
RUNC_VERSION="$(module_version hack/tools/runc github.com/opencontainers/runc)"
CNI_VERSION="$(module_version hack/tools/cni github.com/containernetworking/plugins)"
COREDNS_VERSION="$(module_version hack/tools/coredns github.com/coredns/coredns)"

# cached NAME VERSION BUILD-FUNCTION [LINK]: builds NAME into the cache
# unless present, then links it into _output/bin/node (or LINK there).
cached() {
  local name="$1" version="$2" build="$3" link="${4:-$1}"
  local dir="${CACHE_DIR}/node/${name}/${version}-${GO_VERSION}"
  if [[ ! -x "${dir}/${name}" ]]; then
    log "building ${name} ${version} (first time; later runs reuse ${dir})"
    local tmp
    tmp="$(mktemp -d "${CACHE_DIR}/.build.XXXXXX")"
    "${build}" "${tmp}/${name}" "${name}"
    mkdir -p "${dir}"
    mv "${tmp}/${name}" "${dir}/${name}"
    rmdir "${tmp}"
  fi
  ln -sfn "${dir}/${name}" "${OUT_DIR}/${link}"
}

build_kubelet() {
  CGO_ENABLED=0 go build -trimpath -ldflags "$(nestlet::kube_ldflags "${KUBE_VERSION}")" -o "$1" k8s.io/kubernetes/cmd/kubelet
}

build_kube_proxy() {
  CGO_ENABLED=0 go build -trimpath -ldflags "$(nestlet::kube_ldflags "${KUBE_VERSION}")" -o "$1" k8s.io/kubernetes/cmd/kube-proxy
}

build_containerd() { # out name
  local pkg=github.com/containerd/containerd/v2
  local tags="urfave_cli_no_docs"
  [[ "$2" == containerd-shim-runc-v2 ]] && tags+=" no_grpc"
  (cd hack/tools/containerd && CGO_ENABLED=0 go build -trimpath -tags "${tags}" \
    -ldflags "-s -w -X ${pkg}/version.Version=${CONTAINERD_VERSION} -X ${pkg}/version.Package=${pkg}" \
    -o "$1" "${pkg}/cmd/$2")
}

build_runc() {
  (cd hack/tools/runc && CGO_ENABLED=1 go build -trimpath -tags "seccomp urfave_cli_no_docs netgo osusergo" \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v} -extldflags -static" -o "$1" github.com/opencontainers/runc)
}

build_cni() { # out name
  local p
  case "$2" in
    bridge | loopback) p="main/$2" ;;
    host-local) p="ipam/$2" ;;
    portmap) p="meta/$2" ;;
  esac
  (cd hack/tools/cni && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1" "github.com/containernetworking/plugins/plugins/${p}")
}

build_coredns() {
  (cd hack/tools/coredns && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1" .)
}

cached kubelet "${KUBE_VERSION}" build_kubelet
cached kube-proxy "${KUBE_VERSION}" build_kube_proxy
for bin in containerd containerd-shim-runc-v2 ctr; do
  cached "${bin}" "${CONTAINERD_VERSION}" build_containerd
done
cached runc "${RUNC_VERSION}" build_runc
cached coredns "${COREDNS_VERSION}" build_coredns
for plugin in bridge host-local loopback portmap; do
  cached "${plugin}" "${CNI_VERSION}" build_cni "cni/${plugin}"
done

# The images are small and rebuilt every time (seconds), so they always
# match hack/images.
build_images() {
  local dir="${OUT_DIR}/images" tmp
  tmp="$(mktemp -d)"
  mkdir -p "${dir}"
  (
    cd hack/images
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${tmp}/pause" ./pause
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${tmp}/demo-app" ./demo-app
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${tmp}/volume-helper" ./volume-helper
    go build -o "${tmp}/build-image" ./build-image
  )
  "${tmp}/build-image" -name nestlet.local/pause:v1 -bin "${tmp}/pause" -path /pause -out "${dir}/pause.tar" >&2
  "${tmp}/build-image" -name nestlet.local/demo-app:v1 -bin "${tmp}/demo-app" -path /demo-app -out "${dir}/demo-app.tar" -expose 8080/tcp >&2
  "${tmp}/build-image" -name nestlet.local/volume-helper:v1 -bin "${tmp}/volume-helper" -path /volume-helper -out "${dir}/volume-helper.tar" >&2
  "${tmp}/build-image" -name "nestlet.local/coredns:${COREDNS_VERSION}" -bin "${OUT_DIR}/coredns" -path /coredns -out "${dir}/coredns.tar" -expose 53/udp >&2
  rm -rf "${tmp}"
}
build_images

log "ready in ${OUT_DIR}: kubelet and kube-proxy ${KUBE_VERSION}, containerd ${CONTAINERD_VERSION}, runc ${RUNC_VERSION}, CNI plugins ${CNI_VERSION}, CoreDNS ${COREDNS_VERSION}, images nestlet.local/pause:v1, nestlet.local/demo-app:v1, nestlet.local/volume-helper:v1 and nestlet.local/coredns:${COREDNS_VERSION}"
