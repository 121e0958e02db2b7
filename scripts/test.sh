#!/usr/bin/env bash
# Builds (if needed) and runs every test through ctest: Catch2, Lua specs inside kagent-rt,
# CPU-mode evaluator tests, and GPU checks (reported as skipped where no GPU exists).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)"
ctest --preset default -j2 "$@"
