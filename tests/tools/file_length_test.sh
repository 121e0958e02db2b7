#!/usr/bin/env bash
# No source file of the runtime, the evaluator and profiler, the agents, the scripts, the
# benchmarks or the tests is over 400 lines: a file that grows past it is split along its seams
# (docs/architecture.md). Docs and generated files (types/) are outside the rule.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAX=400
FOLDERS=(src agents scripts bench)
# Under tests/ every file counts (specs, Python tests, fixtures written by hand, scripts without an
# ending such as the fake nvidia-smi) except these, each with its reason:
TESTS_EXEMPT=(
  'tests/browser/package-lock.json'          # written by npm, not by hand
  'tests/fixtures/compile_errors/*.txt'      # compilers' output kept as it came (data)
  '*.md'                                     # prose: docs are outside the rule
)
# the working tree's files: tracked ones not deleted, and new ones git does not ignore; in a copy
# without git (a release tarball), every file but caches and npm's modules
tree_files() {
  if git rev-parse --git-dir > /dev/null 2>&1; then git ls-files --cached --others --exclude-standard -- "$@"
  else find "$@" -type f -not -path '*/node_modules/*' -not -path '*/__pycache__/*' -not -name '*.pyc'
  fi | sort -u | while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done
}
exempt() {
  local pattern
  for pattern in "${TESTS_EXEMPT[@]}"; do
    # shellcheck disable=SC2053  # the pattern is a glob on purpose
    [[ $1 == $pattern ]] && return 0
  done
  return 1
}
mapfile -t files < <(tree_files "${FOLDERS[@]}" | grep -E '\.(py|c|cpp|h|hpp|cu|lua|sh)$')
if [ "${#files[@]}" -lt 200 ]; then
  echo "found only ${#files[@]} source files under ${FOLDERS[*]}: is this the repository's root?"
  exit 1
fi
mapfile -t tests < <(tree_files tests | while IFS= read -r f; do exempt "$f" || printf '%s\n' "$f"; done)
if [ "${#tests[@]}" -lt 100 ]; then
  echo "found only ${#tests[@]} files under tests/: is this the repository's root?"
  exit 1
fi
files+=("${tests[@]}")
over=$(printf '%s\0' "${files[@]}" | xargs -0 wc -l |
  awk -v max="$MAX" '$2 != "total" && $1 > max { print "  " $2 ": " $1 " lines" }')
if [ -n "$over" ]; then
  echo "files over $MAX lines (split them along their seams):"
  echo "$over"
  exit 1
fi
echo "all ${#files[@]} files (sources under ${FOLDERS[*]}, and tests/) are at most $MAX lines: ok"
