#!/usr/bin/env bash
# GPU check of one figure per kernel (issue #57; exits 77 = skipped without a GPU): showcase #36
# (RMSNorm, bf16) from its Triton kernel, --rounds 0 (the start, then the final confirmation), then
# agents/bench.lua on the run's folder and `kagent-eval check` on its best kernel. The three
# "x eager" (the run's last line, bench.lua's optimized_vs_eager, check's speedup_vs_eager) must
# agree within 3% of each other (the issue's bound on an H100). tests/lua/figures_agree_cpu_spec.lua
# is the CPU version. About 3 minutes on an H100.
# Usage: tests/gpu/figures_agree_gpu_check.sh [folder]   (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
PY="${KAGENT_PYTHON:-python3}"
OUT="${1:-/tmp/kagent-figures-agree}"
rm -rf "$OUT"
mkdir -p "$OUT"
problem=examples/problems/36_rmsnorm.py
"$BIN" agents/beam.lua --problem "$problem" --kernel examples/kernels/36_rmsnorm.py --dtype bf16 --rounds 0 \
  --out "$OUT/runs" --db "$OUT/kagent.db" > "$OUT/run.log" 2>&1 || { tail -n 30 "$OUT/run.log"; exit 1; }
line=$(grep -o 'confirmed best [^(]*([^)]*)' "$OUT/run.log" | tail -n 1)
run=$(ls -d "$OUT"/runs/*/ | head -n 1)
"$BIN" agents/bench.lua "$run" --dtype bf16 --baselines eager --no-compare --json "$OUT/bench.json" \
  > "$OUT/bench.log" 2>&1 || { tail -n 30 "$OUT/bench.log"; exit 1; }
PYTHONPATH=src/gpu/eval "$PY" -m kagent_eval check "$problem" "$run/best_kernel.py" --dtype bf16 --json \
  > "$OUT/check.json" 2> "$OUT/check.log" || { tail -n 30 "$OUT/check.log"; exit 1; }
"$PY" - "$line" "$OUT/bench.json" "$OUT/check.json" <<'PY'
import json, re, sys
line, bench, check = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
m = re.search(r"([0-9.]+)x eager", line)
figures = {"last line": float(m.group(1)) if m else None,
           "bench.lua": bench[0]["speedup"].get("optimized_vs_eager"),
           "kagent-eval check": check.get("speedup_vs_eager")}
print("x eager: " + ", ".join("%s %s" % (k, "%.3f" % v if v else "-") for k, v in figures.items()))
vals = [v for v in figures.values() if isinstance(v, (int, float)) and v > 0]
if len(vals) < 3:
    print("FAIL: a figure is missing (%s)" % line); sys.exit(1)
spread = max(vals) / min(vals)
print("largest / smallest: %.3f (bound 1.03)" % spread)
sys.exit(0 if spread <= 1.03 else 1)
PY
