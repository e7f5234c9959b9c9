#!/usr/bin/env bash
# make demo: a local tree of real clusters (hack/demo/playground.yaml: root;
# east and west; two leaves each with one real node, a kubelet with
# containerd, labelled with region and zone; kwok nodes instead where this
# machine cannot run real ones, which it says), joined with nestctl token create / nestctl join, the Deployments of
# hack/demo/deployments.yaml applied at the root, where their pods went, and
# a pod in east calling a Service served from west.
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

step "node runtime of the real leaves: kubelet, containerd, runc, CNI plugins and the demo app's image (cached)"
if ! hack/install-node-runtime.sh; then
  echo "the node runtime could not be installed (see above): the leaves will run kwok nodes" >&2
fi

step "starting the playground in ${DIR}"
up_log="$(mktemp)"
"${BIN}/nestctl" playground up --config hack/demo/playground.yaml --dir "${DIR}" \
  --bin-dir "${BIN}" --nestlet-bin-dir "${BIN}" | tee "${up_log}"
real_nodes=true
if grep -q "real nodes run on kwok instead" "${up_log}"; then
  real_nodes=false
fi
rm -f "${up_log}"

KUBECONFIG_PATH="${DIR}/kubeconfig"
kubectl() { "${BIN}/kubectl" --kubeconfig "${KUBECONFIG_PATH}" "$@"; }

step "kubectl apply -f hack/demo/deployments.yaml (at the root)"
kubectl apply -f hack/demo/deployments.yaml
kubectl rollout status deployment/east-only --timeout=5m
kubectl rollout status deployment/spread --timeout=5m
kubectl rollout status deployment/west-only --timeout=5m

step "kubectl get nodes: the region clusters are nodes with ROLES cluster"
kubectl get nodes -L topology.kubernetes.io/region

step "kubectl get pods -o wide: NODE is the cluster each pod went to"
kubectl get pods -o wide

step "where each Deployment's pods run (pods per node at the root)"
for app in east-only spread west-only; do
  printf '%-10s' "${app}:"
  kubectl get pods -l "app=${app}" --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | uniq -c | awk '{printf " %s on %s", $1, $2}'
  echo
done

if [[ "${real_nodes}" == true ]]; then
  step "kubectl exec at the root, into a container running two levels down (through the nestlet-proxy tunnels)"
  kubectl exec deployment/east-only -- /demo-app echo "hello from a real container two levels below the root, named:"
  kubectl exec deployment/east-only -- /demo-app hostname
  step "kubectl logs at the root: the container's real output (its start, and the kubelet's readiness probes)"
  kubectl logs deployment/east-only --tail=3
  step "a pod in east calls the Service west-only by name: served from the other region, through the gateways' tunnels"
  for i in 1 2 3; do
    for try in $(seq 1 30); do
      if kubectl exec deployment/east-only -- /demo-app get http://west-only/from-east 2>/dev/null; then
        break
      fi
      [[ ${try} -lt 30 ]] || { echo "west-only did not answer from east" >&2; exit 1; }
      sleep 1
    done
  done
  step "kubectl top pod at the root: the containers' CPU and memory, read by the root's metrics-server through the proxies' node ports"
  for try in $(seq 1 60); do
    if out=$(kubectl top pod 2>/dev/null) && grep -q '^east-only' <<<"${out}"; then
      echo "${out}"
      break
    fi
    [[ ${try} -lt 60 ]] || { echo "kubectl top pod at the root showed no east-only pod after 2 minutes" >&2; exit 1; }
    sleep 2
  done
else
  step "kubectl exec at the root, into a pod two levels down (kwok runs the command on this machine)"
  kubectl exec deployment/east-only -- echo "hello from a pod in a leaf of east"
fi

step "nestctl tree"
"${BIN}/nestctl" --kubeconfig "${KUBECONFIG_PATH}" tree

trap - ERR
cat <<MSG

Demo ready in $((SECONDS - start))s. Point kubectl at the root:

  export KUBECONFIG=${KUBECONFIG_PATH}
  kubectl get nodes
  kubectl scale deployment east-only --replicas=10
  kubectl exec deployment/east-only -- /demo-app hostname
  kubectl logs -f deployment/east-only

Logs: ${DIR}/<cluster>/*.log, ${DIR}/<cluster>-nestlet.log
make demo-down stops everything.
MSG
