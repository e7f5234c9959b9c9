#!/usr/bin/env bash
# make demo: a local tree of real clusters (hack/demo/playground.yaml: root;
# east and west; two leaves each with kwok nodes labelled with region and
# zone), joined with nestctl token create / nestctl join, the Deployments of
# hack/demo/deployments.yaml applied at the root, and where their pods went.
# Everything keeps running until make demo-down.
#
#   hack/demo.sh        build what is missing, start, deploy, show
#   hack/demo.sh down   stop every process and remove the playground directory
#
# NESTLET_PLAYGROUND_DIR moves the playground (default
# ${XDG_CACHE_HOME:-~/.cache}/nestlet/playground, beside the binary cache).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
source hack/lib.sh

BIN="${ROOT}/_output/bin"
DIR="${NESTLET_PLAYGROUND_DIR:-$(dirname "$(nestlet::cache_dir)")/playground}"

if [[ "${1:-up}" == "down" ]]; then
  if [[ -x "${BIN}/nestctl" ]]; then
    exec "${BIN}/nestctl" playground down --dir "${DIR}"
  fi
  exec go run ./cmd/nestctl playground down --dir "${DIR}"
fi

step() { printf '\n== %s\n' "$*"; }
trap 'echo "make demo failed; make demo-down stops whatever is left" >&2' ERR
start=${SECONDS}

step "binaries: etcd, Kubernetes and kwok from the Go module proxy (cached), Nestlet from this checkout"
hack/install-binaries.sh
hack/build.sh

step "starting the playground in ${DIR}"
"${BIN}/nestctl" playground up --config hack/demo/playground.yaml --dir "${DIR}" \
  --bin-dir "${BIN}" --nestlet-bin-dir "${BIN}"

KUBECONFIG_PATH="${DIR}/kubeconfig"
kubectl() { "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" "$@"; }

step "kubectl apply -f hack/demo/deployments.yaml (at the root)"
kubectl apply -f hack/demo/deployments.yaml
kubectl rollout status deployment/east-only --timeout=5m
kubectl rollout status deployment/spread --timeout=5m

step "kubectl get nodes: the region clusters are nodes with ROLES cluster"
kubectl get nodes -L topology.kubernetes.io/region

step "kubectl get pods -o wide: NODE is the cluster each pod went to"
kubectl get pods -o wide

step "where each Deployment's pods run (pods per node at the root)"
for app in east-only spread; do
  printf '%-10s' "${app}:"
  kubectl get pods -l "app=${app}" --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | uniq -c | awk '{printf " %s on %s", $1, $2}'
  echo
done

step "kubectl exec at the root, into a pod two levels down (through the nestlet-proxy tunnels)"
kubectl exec deployment/east-only -- echo "hello from a pod in a leaf of east"

step "nestctl tree"
"${BIN}/nestctl" --kubeconfig "${KUBECONFIG_PATH}" tree

trap - ERR
cat <<MSG

Demo ready in $((SECONDS - start))s. Point kubectl at the root:

  export KUBECONFIG=${KUBECONFIG_PATH}
  kubectl get nodes
  kubectl scale deployment east-only --replicas=10
  kubectl exec deployment/east-only -- echo hello

Logs: ${DIR}/<cluster>/*.log, ${DIR}/<cluster>-nestlet.log
make demo-down stops everything.
MSG
