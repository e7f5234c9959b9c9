#!/usr/bin/env bash
# Puts a table written by test/benchtable (-md) into README.md, whole, in
# place of what is between the lines <!-- make-bench:begin --> and
# <!-- make-bench:end -->. hack/bench.sh runs it after a full run.
#
#   hack/bench-readme.sh _output/bench.md
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
table="${1:?usage: hack/bench-readme.sh TABLE.md}"
readme="${ROOT}/README.md"
for marker in '<!-- make-bench:begin -->' '<!-- make-bench:end -->'; do
  if [[ "$(grep -cxF -- "${marker}" "${readme}")" != 1 ]]; then
    echo "README.md must hold the line ${marker} exactly once" >&2
    exit 1
  fi
done
tmp="$(mktemp)"
awk -v table="${table}" '
  $0 == "<!-- make-bench:begin -->" { print; while ((getline line < table) > 0) print line; skip = 1; next }
  $0 == "<!-- make-bench:end -->" { skip = 0 }
  !skip { print }
' "${readme}" > "${tmp}"
mv "${tmp}" "${readme}"
