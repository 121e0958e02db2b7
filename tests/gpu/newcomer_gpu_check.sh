#!/usr/bin/env bash
# GPU check of a newcomer's first hour (needs a GPU; exits 77 = skipped without one):
#  1. kagent-eval check on KernelBench #36 (bf16) with examples/kernels/36_rmsnorm.py against the
#     pool's evaluate job of the same kernel: the same verdict, and the two medians side by side.
#  2. agents/tune.lua --rounds 1 on #36 (bf16): the status line's phases in the log (baselines,
#     round, "confirmation + sanitizer"), and the last lines naming the confirmed figure and the
#     search's.
#  3. where KernelAgent's artifacts are (KAGENT_KA_ARTIFACTS, or shared/data/ka-artifacts): its
#     benchmark.py times that run folder (problem.py, input_kernel.py,
#     optimized_kernel_beam_search.py) with its own do_bench.
# Prints a table last. Usage: tests/gpu/newcomer_gpu_check.sh [out_dir]
#   KAGENT_BIN (default build/kagent-rt), KAGENT_PYTHON (default python3)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
PY="${KAGENT_PYTHON:-python3}"
OUT="${1:-/tmp/kagent-newcomer-gpu-check}"
rm -rf "$OUT" && mkdir -p "$OUT"
export PYTHONPATH="$PWD/src/gpu/eval${PYTHONPATH:+:$PYTHONPATH}"
fail=0 rows=()
P=examples/problems/36_rmsnorm.py K=examples/kernels/36_rmsnorm.py

# 1. kagent-eval check against the pool
"$PY" -m kagent_eval check "$P" "$K" --dtype bf16 --device 0 --json > "$OUT/check.json" 2> "$OUT/check.err"
cat > "$OUT/pool.lua" <<LUA
local pool = kagent.gpu.pool({ devices = { 0 } })
local r = pool:evaluate({ problem = "$P", candidate = assert(kagent.fs.read("$K")), dtype = "bf16", tolerance = "strict",
  bench = { baselines = { "eager", "compile" } }, profile = { metric_set = "full" } })
pool:close()
print(kagent.json.encode({ ok = r.ok, stage = r.stage, median = r.time_ms and r.time_ms.median, error = r.error }))
LUA
pool=$("$BIN" --env-file /dev/null --log-level warn "$OUT/pool.lua")
read -r c_ok c_ms < <("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("ok"), (r.get("time_ms") or {}).get("median"))' "$OUT/check.json" 2>/dev/null || echo "None None")
read -r p_ok p_ms < <(echo "$pool" | "$PY" -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r.get("ok"), r.get("median"))' 2>/dev/null || echo "None None")
ratio=$("$PY" -c "print('%.3f' % ($c_ms / $p_ms))" 2>/dev/null || echo "-")
if [ "$c_ok" != "True" ] || [ "$p_ok" != "True" ]; then fail=1; fi
rows+=("check vs pool #36 bf16|check ok=$c_ok ${c_ms} ms, pool ok=$p_ok ${p_ms} ms|ratio $ratio (expect 0.9-1.1)")

# 2. the status line's phases and the last lines
KAGENT_PROGRESS=lines "$BIN" --env-file /dev/null agents/tune.lua --problem "$P" --kernel "$K" --dtype bf16 --rounds 1 \
  --out "$OUT/runs" > "$OUT/tune.out" 2> "$OUT/tune.err"
code=$?
phases=""
for p in "[baselines" "[round 1/1" "[confirmation + sanitizer"; do grep -qF "$p" "$OUT/tune.err" && phases+="${p#[} ok; " || { phases+="${p#[} MISSING; "; fail=1; }; done
last=$(grep -E "confirmed best|the search measured" "$OUT/tune.err" | cut -c1-150 | tr '\n' ' ')
[ -n "$last" ] || fail=1
rows+=("tune.lua #36 phases (exit $code)|$phases|$last")

# 3. KernelAgent's benchmark.py on the run folder
ka="${KAGENT_KA_ARTIFACTS:-$PWD/shared/data/ka-artifacts}"
run=$(ls -d "$OUT"/runs/*/ 2>/dev/null | head -1)
if [ -f "$ka/benchmark.py" ] && [ -n "$run" ]; then
  "$PY" "$ka/benchmark.py" "${run%/}" > "$OUT/ka.out" 2>&1
  kcode=$?
  rows+=("KernelAgent benchmark.py on the run|exit $kcode|$(grep -E 'eager=' "$OUT/ka.out" | head -1 | sed 's/^ *//')")
  [ $kcode -eq 0 ] || fail=1
else
  rows+=("KernelAgent benchmark.py on the run|skipped|no benchmark.py at $ka")
fi

echo
echo "| check | result | figures |"
echo "|---|---|---|"
for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
exit $fail
