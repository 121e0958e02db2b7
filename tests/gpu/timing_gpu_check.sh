#!/usr/bin/env bash
# GPU time per verified candidate (#29), every check in one call (about 9 minutes on one H200):
#   1. bench/adaptive_timing.py   the fixed second of calls against the confidence-interval rule
#                                 on the five showcase problems and twenty KernelBench level-1
#                                 references, side by side; a noisy control both must flag
#   1b. bench/warmup_time.py      the default warm-up (0.025 s) against 0.1 s on the same problems,
#                                 with and without a wait at the lease's gate after it
#   2. bench/eval_latency.py      a warm job's wall and harness overhead per phase, the fixed
#                                 loop (bench.stop=time, 1 s: the earlier default) against the
#                                 rule; with an earlier evaluator (KAGENT_BEFORE_EVAL, or the
#                                 git ref KAGENT_BEFORE_REF when git can export it) also that one
#   3. bench/profile_cost.py      the profiler fixture's CUPTI profile, sol and full, per step
#   4. bench/pool_start.lua       a pool of 4 workers on GPU 0 against a pool of 1
# From the repository root on the GPU machine:
#   KAGENT_BIN=.devbuild/bin/kagent-rt KAGENT_PROF_LIB=$PWD/.devbuild/bin/libkagent_prof.so \
#     bash tests/gpu/timing_gpu_check.sh
# Logs under $OUT (default /tmp/kagent-timing); the table is printed last. Exit 77 without a GPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
OUT="${OUT:-/tmp/kagent-timing}"
mkdir -p "$OUT"
BIN="${KAGENT_BIN:-.devbuild/bin/kagent-rt}"
export PYTHONPATH="$PWD/src/gpu/eval" PYTHONUNBUFFERED=1
[ -z "${KAGENT_PROF_LIB:-}" ] && [ -f .devbuild/bin/libkagent_prof.so ] && \
  export KAGENT_PROF_LIB="$PWD/.devbuild/bin/libkagent_prof.so"
KB="${KAGENT_KB_DIR:-/work/shared/data/kernelbench/level1}"

step() {  # step NAME COMMAND... : runs with its log under $OUT, prints its tail
  local name="$1"; shift
  local t0=$(date +%s)
  timeout 420 "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(( $(date +%s) - t0 ))s"
  tail -n 6 "$OUT/$name.log"
}

step adaptive python3 bench/adaptive_timing.py --kb-dir "$KB" --json "$OUT/adaptive.json"
step warmup python3 bench/warmup_time.py --kb-dir "$KB" --json "$OUT/warmup.json"
step latency_fixed python3 bench/eval_latency.py --n 5 --fresh 0 --stop time --min-time 1.0 --id-base 2000
step latency_ci python3 bench/eval_latency.py --n 5 --fresh 0 --stop ci --id-base 3000
before="${KAGENT_BEFORE_EVAL:-}"
if [ -z "$before" ] && git rev-parse --git-dir >/dev/null 2>&1; then
  before="$OUT/before"
  rm -rf "$before" && mkdir -p "$before" && \
    git archive "${KAGENT_BEFORE_REF:-main}" src/gpu/eval | tar -x -C "$before" 2>/dev/null && \
    before="$before/src/gpu/eval" || before=""
fi
if [ -n "$before" ] && [ -d "$before/kagent_eval" ]; then
  step latency_before env KAGENT_EVAL_PYTHONPATH="$before" \
    python3 bench/eval_latency.py --n 5 --fresh 0 --stop time --min-time 1.0 --id-base 4000
fi
for m in sol full; do
  step "profile_$m" python3 bench/profile_cost.py tests/gpu/profile_fixture_problem.py \
    tests/gpu/profile_fixture_kernel.py --metrics "$m" --no-ncu --breakdown
done
step pool_start "$BIN" bench/pool_start.lua --workers 4 --devices 0

echo
echo "== #29 GPU time per verified candidate: summary"
grep -h "^RESULT\|^timed-call seconds\|^noisy control" "$OUT/adaptive.log" "$OUT/warmup.log"
for k in latency_before latency_fixed latency_ci; do
  [ -f "$OUT/$k.log" ] || continue
  printf '%-15s %s | %s | %s\n' "$k" "$(grep -m1 '^warm ' "$OUT/$k.log")" \
    "$(grep -m1 'harness overhead' "$OUT/$k.log" | sed 's/^ *//')" \
    "$(grep -m1 'timed calls per job' "$OUT/$k.log" | sed 's/^ *//')"
done
for m in sol full; do
  printf '%-15s %s\n' "profile_$m" "$(grep -m1 '^cupti' "$OUT/profile_$m.log")"
done
grep -h "^pool of\|^RESULT" "$OUT/pool_start.log"
