#!/usr/bin/env bash
# No source file of the runtime, the evaluator and profiler, the agents, the scripts or the
# benchmarks is over 400 lines: a file that grows past it is split along its seams
# (docs/architecture.md). Tests, docs and generated files (types/) are outside the rule.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAX=400
FOLDERS=(src agents scripts bench)
# the working tree's files: tracked ones not deleted, and new ones git does not ignore
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- "${FOLDERS[@]}" |
  grep -E '\.(py|c|cpp|h|hpp|cu|lua|sh)$' | sort -u | while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done)
if [ "${#files[@]}" -lt 200 ]; then
  echo "found only ${#files[@]} source files under ${FOLDERS[*]}: is this the repository's root?"
  exit 1
fi
over=$(printf '%s\0' "${files[@]}" | xargs -0 wc -l |
  awk -v max="$MAX" '$2 != "total" && $1 > max { print "  " $2 ": " $1 " lines" }')
if [ -n "$over" ]; then
  echo "source files over $MAX lines (split them along their seams):"
  echo "$over"
  exit 1
fi
echo "all ${#files[@]} source files under ${FOLDERS[*]} are at most $MAX lines: ok"
