#!/usr/bin/env bash
# make conformance: the Kubernetes conformance suite against the root of a
# local tree, and against one of its leaves directly as the baseline, in the
# same run; writes docs/conformance.md (hack/tools/conformance/table).
#
#   1. builds, cached by version: the upstream e2e suite (`go test -c
#      k8s.io/kubernetes/test/e2e`, hack/tools/conformance/go.mod, at the
#      Kubernetes version of go.mod: about 15 minutes on 2 cores the first
#      time), agnhost from the same module, ginkgo's CLI, and the sample API server at
#      its image's version (hack/tools/sample-apiserver);
#   2. makes the images the specs run, without a registry (hack/conformance/images.sh):
#      agnhost, busybox and stand-ins for the others, under the names the suite uses;
#   3. starts the demo tree (hack/demo/playground.yaml) in its own directory, every real node
#      with those images, every parent giving its children's virtual nodes the taint effect
#      PreferNoSchedule (every cluster's scheduler is Nestlet's: a cluster made only of
#      clusters whose nodes take pods, docs/scheduling.md);
#   4. runs the specs against the root, then the leaf; writes the table; stops the tree.
#
# Settings (environment):
#   CONFORMANCE_LABELS  ginkgo --label-filter (default: Conformance && !Serial && !Disruptive,
#                       412 specs of v1.35.4)
#   CONFORMANCE_FOCUS   ginkgo --focus, a regular expression over the specs' names (default: all)
#   CONFORMANCE_PROCS   specs run at once (default 4)
#   CONFORMANCE_LEAF    the baseline leaf (default east-1)
#   CONFORMANCE_TOGETHER=1  run the specs at the root and at the leaf at the same time (about
#                       half the time; both share the machine, and the leaf also runs the
#                       root's pods): the table says so. Each side orders its specs by its
#                       own seed: in the same order, StatefulSet's evicted-pod spec at the
#                       leaf came while its run from the root held the same host port
#                       (21017) on the leaf's one host, as that exception does for its 5
#                       minutes; in orders of their own the two overlap only by chance
#   CONFORMANCE_SEED    the order of the specs (ginkgo --seed; default the time): the root
#                       runs with it, the leaf with it + 1
#   CONFORMANCE_DIR     where the tree, the reports and the logs go (default
#                       ${XDG_CACHE_HOME:-~/.cache}/nestlet/conformance; kept after the run)
#   CONFORMANCE_KEEP=1  leave the tree running after the run (nestctl playground down --dir ...)
#   CONFORMANCE_SERIAL=1  the Serial specs instead (labels default to
#                       `Conformance && Serial`: each spec alone in the cluster, so one at a
#                       time, the root's run then the leaf's); writes docs/conformance-serial.md
#                       and README's second conformance line
#
#   hack/conformance.sh tools DIR   only steps 1 and 2: e2e.test, ginkgo and the images' OCI
#                                   archives (DIR/images) into DIR, for make test's few specs
#                                   (test/e2e/tree)
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
source hack/lib.sh

# The commit the run builds and runs, read before it starts: a commit made
# during a run of most of an hour is not the one that ran.
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' ':!README.md' || echo '+changes')"
SERIAL="${CONFORMANCE_SERIAL:-}"
if [[ "${SERIAL}" == 1 ]]; then
  LABELS="${CONFORMANCE_LABELS:-Conformance && Serial}"
  PROCS=1
  CONFORMANCE_TOGETHER=
  page=conformance-serial name="conformance, Serial specs" marker=make-conformance-serial
else
  LABELS="${CONFORMANCE_LABELS:-Conformance && !Serial && !Disruptive}"
  PROCS="${CONFORMANCE_PROCS:-4}"
  page=conformance name=conformance marker=make-conformance
fi
FOCUS="${CONFORMANCE_FOCUS:-}"
LEAF="${CONFORMANCE_LEAF:-east-1}"
DIR="${CONFORMANCE_DIR:-$(dirname "$(nestlet::cache_dir)")/conformance}"
BIN="${ROOT}/_output/bin"
CACHE_DIR="$(nestlet::cache_dir)"
GO_VERSION="$(go env GOVERSION)"
KUBE_VERSION="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
TOOLS="${CACHE_DIR}/conformance/${KUBE_VERSION}-${GO_VERSION}"
MOD=hack/tools/conformance

log() { printf '[conformance] %s\n' "$*" >&2; }

# tool NAME BUILD...: builds NAME into TOOLS unless present (BUILD gets the output path).
tool() {
  local name="$1"
  shift
  if [[ ! -x "${TOOLS}/${name}" ]]; then
    log "building ${name} (first time; later runs reuse ${TOOLS})"
    mkdir -p "${TOOLS}"
    "$@" "${TOOLS}/${name}.tmp"
    mv "${TOOLS}/${name}.tmp" "${TOOLS}/${name}"
  fi
}
build_e2e() {
  (cd "${MOD}" && CGO_ENABLED=0 go test -c -trimpath -ldflags "$(nestlet::kube_ldflags "${KUBE_VERSION}")" -o "$1" k8s.io/kubernetes/test/e2e)
}
build_agnhost() {
  (cd "${MOD}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1" k8s.io/kubernetes/test/images/agnhost)
}
# The Aggregator spec's sample API server at the version of the image it
# names (hack/tools/sample-apiserver): the RBAC the spec grants is that
# version's (a newer one lists ConfigMaps too, and is never ready).
SAMPLE_APISERVER_VERSION="$(cd hack/tools/sample-apiserver && go list -m -f '{{.Version}}' k8s.io/sample-apiserver)"
build_sample_apiserver() {
  (cd hack/tools/sample-apiserver && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1" k8s.io/sample-apiserver)
}
build_ginkgo() {
  (cd "${MOD}" && CGO_ENABLED=0 go build -trimpath -o "$1" github.com/onsi/ginkgo/v2/ginkgo)
}

if [[ "${1:-}" == tools ]]; then
  # make test's few specs: the tools and the images, linked into DIR.
  out="$2"
  tool e2e.test build_e2e
  tool agnhost build_agnhost
  tool ginkgo build_ginkgo
  mkdir -p "${out}"
  ln -sfn "${TOOLS}/e2e.test" "${out}/e2e.test"
  ln -sfn "${TOOLS}/ginkgo" "${out}/ginkgo"
  hack/conformance/images.sh "${TOOLS}/agnhost" "${out}/images"
  exit 0
fi

hack/install-binaries.sh
hack/build.sh
hack/install-node-runtime.sh
tool e2e.test build_e2e
tool agnhost build_agnhost
tool ginkgo build_ginkgo
tool "sample-apiserver-${SAMPLE_APISERVER_VERSION}" build_sample_apiserver
mkdir -p "${DIR}"
table="${DIR}/table"
(cd "${MOD}" && go build -o "${table}" ./table)

IMAGES="${DIR}/images"
hack/conformance/images.sh "${TOOLS}/agnhost" "${IMAGES}" "${TOOLS}/sample-apiserver-${SAMPLE_APISERVER_VERSION}"

PG="${DIR}/tree"
"${BIN}/nestctl" playground down --dir "${PG}" >/dev/null
stop() {
  if [[ "${CONFORMANCE_KEEP:-}" == 1 ]]; then
    log "the tree keeps running: ${BIN}/nestctl playground down --dir ${PG}"
    return
  fi
  # Keep the logs of the run beside the reports, then stop everything.
  rm -rf "${DIR}/logs"
  mkdir -p "${DIR}/logs"
  (cd "${PG}" && find . -maxdepth 2 -name '*.log' -exec cp --parents -t "${DIR}/logs" {} +) 2>/dev/null || true
  "${BIN}/nestctl" playground down --dir "${PG}" >/dev/null
}
trap stop EXIT

archives=()
for a in "${IMAGES}"/*.tar; do
  archives+=(--image-archive "${a}")
done
log "starting the demo tree in ${PG}"
"${BIN}/nestctl" playground up --config hack/demo/playground.yaml --dir "${PG}" \
  --bin-dir "${BIN}" --nestlet-bin-dir "${BIN}" "${archives[@]}" \
  --agent-arg=--child-taint-effect=PreferNoSchedule | tee "${DIR}/playground-up.log"
if grep -q "real nodes run on kwok instead" "${DIR}/playground-up.log"; then
  log "the leaves could not run real nodes (see above): the suite needs real containers"
  exit 1
fi

SEED="${CONFORMANCE_SEED:-$(date +%s)}"

# run SIDE KUBECONFIG SEED: the specs against one cluster, in SEED's order, a ginkgo JSON
# report in DIR/SIDE.json.
run() {
  local side="$1" kubeconfig="$2" seed="$3" out="${DIR}/${1}"
  rm -rf "${out}"
  mkdir -p "${out}"
  log "running the specs against the ${side} (${PROCS} at once; output in ${out}/ginkgo.log)"
  local start=${SECONDS} rc=0 focus=()
  [[ -z "${FOCUS}" ]] || focus=(--focus="${FOCUS}")
  "${TOOLS}/ginkgo" --procs="${PROCS}" --seed="${seed}" --label-filter="${LABELS}" "${focus[@]}" --timeout=6h \
    --no-color --output-dir="${out}" --json-report=report.json \
    "${TOOLS}/e2e.test" -- --kubeconfig="${kubeconfig}" --provider=skeleton \
    --kubectl-path="${BIN}/kubectl" --report-dir="${out}" >"${out}/ginkgo.log" 2>&1 || rc=$?
  log "${side}: ginkgo exited ${rc} after $(((SECONDS - start) / 60)) min; $(grep -E '^(Ran|FAIL!|SUCCESS!)' "${out}/ginkgo.log" | tr '\n' ' ')"
  cp "${out}/report.json" "${DIR}/${side}.json"
}
how="one after the other"
if [[ "${CONFORMANCE_TOGETHER:-}" == 1 ]]; then
  how="at the same time"
  run root "${PG}/kubeconfig" "${SEED}" &
  run leaf "${PG}/${LEAF}/admin.kubeconfig" $((SEED + 1)) &
  wait
else
  run root "${PG}/kubeconfig" "${SEED}"
  run leaf "${PG}/${LEAF}/admin.kubeconfig" $((SEED + 1))
fi

# The whole table of this run, beside the earlier ones (a second run of the
# day gets -2, ...); the summary compares it with the latest earlier one of
# the same selection (a whole run, not a focused one).
date="$(date -u +%Y-%m-%d)"
suffix="${SERIAL:+-serial}"
fullpage="docs/conformance/${date}${suffix}.md"
for n in 2 3 4 5 6 7 8 9; do
  [[ -e "${fullpage}" ]] || break
  fullpage="docs/conformance/${date}${suffix}-${n}.md"
done
previous=()
if [[ -z "${FOCUS}" ]]; then
  # Pages are named DATE[-serial][-N].md: the latest of this selection.
  last="$(find docs/conformance -maxdepth 1 -name '*.md' -printf '%f\n' 2>/dev/null |
    grep -E "^[0-9]{4}-[0-9]{2}-[0-9]{2}${suffix}(-[0-9])?\.md$" | sed -E 's/^([0-9-]{10}'"${suffix}"')\.md$/\1-1.md/' |
    sort | tail -n 1 | sed -E 's/-1\.md$/.md/' || true)"
  [[ -z "${last}" ]] || previous=(-previous "docs/conformance/${last}")
fi
"${table}" -leaf "${DIR}/leaf.json" -root "${DIR}/root.json" -exceptions hack/conformance/exceptions.txt \
  -summary "docs/${page}.md" -full "${fullpage}" -readme README.md "${previous[@]}" \
  -name "${name}" -marker "${marker}" \
  -title "${date}, Kubernetes ${KUBE_VERSION}, commit ${commit}, leaf ${LEAF}, ${PROCS} specs at once at each side, root and leaf ${how}" \
  -selection "labels \`${LABELS}\`${FOCUS:+, focus \`${FOCUS}\`}"
log "table: docs/${page}.md; reports and logs in ${DIR}"
