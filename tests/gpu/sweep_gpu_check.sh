#!/usr/bin/env bash
# GPU check of agents/sweep.lua (exits 77 = skipped without a GPU): the LLM-free tuner over the
# five showcase problems (examples/problems/{4,36,43,77,82}_*.py, first kernels from
# examples/kernels/), bf16, one round of 4 knob variants each, one problem per GPU at a time.
# Then checks sweep.json: five finished problems, verified, timed against eager and
# torch.compile, GPU-hours counted; prints the table. A run cut off by a time limit is resumed
# by running this again with the same folder.
# Usage: tests/gpu/sweep_gpu_check.sh [sweep_folder]   (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-sweep-showcase}"
mkdir -p "$OUT"
"$BIN" agents/sweep.lua --problems examples/problems/{4,36,43,77,82}_*.py --kernels examples/kernels \
  --policy tune --dtype bf16 --rounds 1 --tune-candidates 4 --metrics sol \
  --out "$OUT" --db "$OUT/kagent.db"
rc=$?
python3 - "$OUT/sweep.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
rows, agg = s.get("results", []), s.get("aggregate", {})
bad = []
def f(v):
    return "%.3f" % v if isinstance(v, (int, float)) else "-"
if [r["name"] for r in rows] != ["4_matmul_gemv", "36_rmsnorm", "43_maxpool3d", "77_conv_transpose3d", "82_depthwise_conv2d"]:
    bad.append("problems: %s" % [r["name"] for r in rows])
for r in rows:
    if r.get("status") != "done" or r.get("verified") is not True:
        bad.append("%s: %s, verified %s, %s" % (r["name"], r.get("status"), r.get("verified"), r.get("error")))
    for k in ("best_ms", "eager_ms", "compile_ms"):
        if not isinstance(r.get(k), (int, float)):
            bad.append("%s: no %s" % (r["name"], k))
    sp = r.get("speedup", {})
    print("FIGURE sweep %s: best %s ms, %sx eager, %sx compile, %sx input, %s" % (r["name"], f(r.get("best_ms")),
          f(sp.get("eager")), f(sp.get("compile")), f(sp.get("input")), r.get("stop_reason")))
if agg.get("correct") != 5 or not agg.get("gpu_hours", 0) > 0 or agg.get("cpu_mode"):
    bad.append("aggregate: correct %s, gpu_hours %s, cpu_mode %s" % (agg.get("correct"), agg.get("gpu_hours"), agg.get("cpu_mode")))
for b in ("eager", "compile"):
    sp = agg.get("speedup", {}).get(b, {})
    print("FIGURE sweep geomean vs %s: %s (mean %s, min %s, max %s, n=%s); fast_1.0 %s, fast_1.2 %s" % (b, f(sp.get("geomean")),
          f(sp.get("mean")), f(sp.get("min")), f(sp.get("max")), sp.get("n"), f(agg["fast_p"][b]["1.0"]), f(agg["fast_p"][b]["1.2"])))
print("FIGURE sweep wall %.0f s, problem time %.0f s, GPU-hours %.4f" % (agg.get("wall_s") or 0, agg.get("problem_s") or 0, agg.get("gpu_hours") or 0))
for b in bad:
    print("FAIL " + b)
sys.exit(1 if bad else 0)
EOF
check=$?
[ "$rc" -eq 0 ] && [ "$check" -eq 0 ] && echo "sweep GPU check: passed" && exit 0
echo "sweep GPU check: FAILED (sweep exit $rc, check $check)"
exit 1
