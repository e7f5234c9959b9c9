#!/usr/bin/env bash
# Builds the control-plane binaries the local test clusters run, from the Go
# module proxy only, into a cache keyed by version, and links them into
# _output/bin (git-ignored) where the launcher, the tests, the demo and the benchmarks
# find them.
#
#   etcd                      hack/etcd (a main around etcdmain, version in hack/etcd/go.mod)
#   kube-apiserver,
#   kube-controller-manager,
#   kube-scheduler, kubectl   k8s.io/kubernetes at the version pinned in go.mod
#   kwok                      sigs.k8s.io/kwok at KWOK_VERSION
#   helm                      helm.sh/helm/v3 (version in hack/tools/helm/go.mod), for the chart tests
#   metrics-server            sigs.k8s.io/metrics-server (version in hack/tools/metrics-server/go.mod),
#                             the clusters' metrics.k8s.io API where a test or the demo wants one
#   local-path-provisioner    github.com/rancher/local-path-provisioner (version in
#                             hack/tools/local-path-provisioner/go.mod), the real leaves' dynamic
#                             provisioner (its helper image: hack/install-node-runtime.sh)
#
# Idempotent: a binary already in the cache is not built again, so a second
# run takes seconds. NESTLET_CACHE_DIR moves the cache (default
# ${XDG_CACHE_HOME:-~/.cache}/nestlet).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

KWOK_VERSION="v0.8.0"
source hack/lib.sh
CACHE_DIR="$(nestlet::cache_dir)"
OUT_DIR="${ROOT}/_output/bin"
GO_VERSION="$(go env GOVERSION)"
KUBE_VERSION="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
ETCD_VERSION="$(cd hack/etcd && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
HELM_VERSION="$(cd hack/tools/helm && go list -m -f '{{.Version}}' helm.sh/helm/v3)"
METRICS_SERVER_VERSION="$(cd hack/tools/metrics-server && go list -m -f '{{.Version}}' sigs.k8s.io/metrics-server)"
LOCAL_PATH_VERSION="$(cd hack/tools/local-path-provisioner && go list -m -f '{{.Version}}' github.com/rancher/local-path-provisioner)"

mkdir -p "${CACHE_DIR}" "${OUT_DIR}"

log() { printf '[install-binaries] %s\n' "$*" >&2; }

# cached NAME VERSION BUILD-FUNCTION: builds NAME into the cache unless present,
# then links it into _output/bin.
cached() {
  local name="$1" version="$2" build="$3"
  local dir="${CACHE_DIR}/${name}/${version}-${GO_VERSION}"
  if [[ ! -x "${dir}/${name}" ]]; then
    log "building ${name} ${version} (first time; later runs reuse ${dir})"
    local tmp
    tmp="$(mktemp -d "${CACHE_DIR}/.build.XXXXXX")"
    "${build}" "${tmp}/${name}"
    mkdir -p "${dir}"
    mv "${tmp}/${name}" "${dir}/${name}"
    rmdir "${tmp}"
  fi
  ln -sfn "${dir}/${name}" "${OUT_DIR}/${name}"
}

build_kube() { # out: builds k8s.io/kubernetes/cmd/<basename out>
  local out="$1"
  CGO_ENABLED=0 go build -trimpath -ldflags "$(nestlet::kube_ldflags "${KUBE_VERSION}")" -o "${out}" "k8s.io/kubernetes/cmd/$(basename "${out}")"
}

build_etcd() {
  (cd hack/etcd && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1" .)
}

build_kwok() {
  local gobin
  gobin="$(dirname "$1")"
  CGO_ENABLED=0 GOBIN="${gobin}" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
}

# helm with the ldflags of helm's own Makefile: its version, and the
# Kubernetes version of its client-go as the default capabilities that
# `helm lint` and `helm template` check charts against.
build_helm() {
  local kube minor p pkg=helm.sh/helm/v3
  kube="$(cd hack/tools/helm && go list -m -f '{{.Version}}' k8s.io/client-go)"
  minor="${kube#v0.}"
  minor="${minor%%.*}"
  local flags="-s -w -X ${pkg}/internal/version.version=${HELM_VERSION} -X ${pkg}/internal/version.gitTreeState=clean"
  for p in pkg/lint/rules pkg/chartutil; do
    flags+=" -X ${pkg}/${p}.k8sVersionMajor=1 -X ${pkg}/${p}.k8sVersionMinor=${minor}"
  done
  (cd hack/tools/helm && CGO_ENABLED=0 go build -trimpath -ldflags "${flags}" -o "$1" "${pkg}/cmd/helm")
}

build_local_path() {
  (cd hack/tools/local-path-provisioner && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1" github.com/rancher/local-path-provisioner)
}

build_metrics_server() {
  (cd hack/tools/metrics-server && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1" sigs.k8s.io/metrics-server/cmd/metrics-server)
}

cached etcd "${ETCD_VERSION}" build_etcd
for bin in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  cached "${bin}" "${KUBE_VERSION}" build_kube
done
cached kwok "${KWOK_VERSION}" build_kwok
cached helm "${HELM_VERSION}" build_helm
cached metrics-server "${METRICS_SERVER_VERSION}" build_metrics_server
cached local-path-provisioner "${LOCAL_PATH_VERSION}" build_local_path

# kwok's own stage definitions (fast node and pod lifecycle, heartbeat with a
# lease), taken from the kwok module at the same version.
stages="${CACHE_DIR}/kwok/${KWOK_VERSION}-${GO_VERSION}/stages.yaml"
if [[ ! -s "${stages}" ]]; then
  kwok_dir="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
  {
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
      pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      echo "---"
      cat "${kwok_dir}/kustomize/stage/${f}"
    done
  } > "${stages}.tmp"
  mv "${stages}.tmp" "${stages}"
fi
ln -sfn "${stages}" "${OUT_DIR}/kwok-stages.yaml"

log "ready in ${OUT_DIR}: etcd ${ETCD_VERSION}, kubernetes ${KUBE_VERSION}, kwok ${KWOK_VERSION}, helm ${HELM_VERSION}, metrics-server ${METRICS_SERVER_VERSION}, local-path-provisioner ${LOCAL_PATH_VERSION}"
