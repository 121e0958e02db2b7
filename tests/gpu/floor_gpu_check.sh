#!/usr/bin/env bash
# GPU check of the LLM-free floor's candidates (agents/flows/floor.lua; exits 77 = skipped without
# a GPU or a KernelBench folder): agents/sweep.lua --policy fuse -- --no-llm on a few KernelBench
# problems, fp32. Each run composes the split's first program, the whole problem as one Inductor
# program (where the split has several subgraphs: Level 3 #1 MLP) and the max-autotune one (ATen
# or Triton GEMMs, where there is a GEMM or a convolution), and keeps the fastest verified one.
# Prints per problem each candidate's time (or why none), the source kept, the floor against
# eager and torch.compile, and the geometric mean against torch.compile. FAIL where a problem has
# no verified first program, where the max-autotune candidate was not tried on a GEMM or a
# convolution, or where the evaluator refused the request; the ratios are printed, not judged.
#   KAGENT_KERNELBENCH=<folder with level2/, level3/> (default .devbuild/kb, then ../shared/data/kernelbench)
#   KAGENT_FLOOR_PROBLEMS="level2/12_Gemm_Multiply_LeakyReLU.py ..." (paths under it) overrides the set
#   KAGENT_FLOOR_CONCURRENT (runs at once, default 4: the compiles run on the host's cores)
#   KAGENT_FLOOR_RUN_TIME (each run's limit, sweep --time, default 5:15: the check ends within 6 minutes)
# Usage: tests/gpu/floor_gpu_check.sh [out_dir]   (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-floor-check}"
KB="${KAGENT_KERNELBENCH:-}"
for c in .devbuild/kb ../shared/data/kernelbench shared/data/kernelbench; do
  [ -z "$KB" ] && [ -d "$c/level2" ] && KB="$c"
done
[ -d "$KB/level2" ] || { echo "SKIP: no KernelBench folder (set KAGENT_KERNELBENCH)"; exit 77; }
PROBLEMS="${KAGENT_FLOOR_PROBLEMS:-level2/12_Gemm_Multiply_LeakyReLU.py level2/76_Gemm_Add_ReLU.py level2/57_Conv2d_ReLU_HardSwish.py level3/1_MLP.py}"
rm -rf "$OUT" && mkdir -p "$OUT"
LIST="$OUT/problems.txt"
: > "$LIST"
for p in $PROBLEMS; do
  [ -f "$KB/$p" ] || { echo "FAIL: no $KB/$p"; exit 1; }
  realpath "$KB/$p" >> "$LIST"
done
t0=$(date +%s)
"$BIN" agents/sweep.lua --problems "$LIST" --policy fuse --devices 0 --max-concurrent "${KAGENT_FLOOR_CONCURRENT:-4}" \
  --time "${KAGENT_FLOOR_RUN_TIME:-5:15}" --out "$OUT/sweep" --db "$OUT/kagent.db" --job-timeout 240 -- --no-llm
rc=$?
echo "sweep exit $rc after $(( $(date +%s) - t0 )) s"
[ -f "$OUT/sweep/table.md" ] && cat "$OUT/sweep/table.md"
"${KAGENT_PYTHON:-python3}" - "$OUT/sweep" <<'EOF'
import json, math, os, sys
root, bad, ratios = sys.argv[1], [], []
runs = []
for d, _, files in os.walk(root):
    if "summary.json" in files:
        try:
            s = json.load(open(os.path.join(d, "summary.json")))
        except ValueError:
            continue
        if s.get("mode") == "fuse":
            runs.append(s)
def ms(v):
    return "%.4f" % v if isinstance(v, (int, float)) else "-"
for s in sorted(runs, key=lambda s: str(s.get("problem"))):
    name = os.path.basename(str(s.get("problem")))
    fp = s.get("first_program") or {}
    cands = fp.get("candidates") or []
    print("%s: floor %s ms (source %s), eager %s, compile %s, x compile %s" % (
        name, ms(fp.get("time_ms")), fp.get("source"), ms(fp.get("eager_ms")), ms(fp.get("compile_ms")),
        ms(fp.get("speedup_vs_compile"))))
    for c in cands:
        print("  %-13s %s" % (c.get("source"), c.get("skipped") or ("%s ms (kernel %s)" % (ms(c.get("time_ms")), c.get("kernel"))
                                                              if c.get("verified") else "no program: %s" % str(c.get("error"))[:200])))
    if not fp.get("verified"):
        bad.append("%s: no verified first program (%s: %s)" % (name, fp.get("stage"), str(fp.get("reason"))[:200]))
    else:
        if isinstance(fp.get("speedup_vs_compile"), (int, float)):
            ratios.append(fp["speedup_vs_compile"])
        times = [c["time_ms"] for c in cands if c.get("verified") and isinstance(c.get("time_ms"), (int, float))]
        if times and fp.get("time_ms") != min(times):
            bad.append("%s: the floor (%s ms) is not the fastest verified candidate (%s ms)" % (name, fp.get("time_ms"), min(times)))
    mat = [c for c in cands if c.get("source") == "max-autotune"]
    if not mat or mat[0].get("skipped"):
        bad.append("%s: the max-autotune candidate was not tried (%s)" % (name, mat and mat[0].get("skipped")))
    for c in cands:
        if "BadRequest" in str(c.get("error")) or "must be true or false" in str(c.get("error")):
            bad.append("%s: the evaluator refused the %s request: %s" % (name, c.get("source"), c.get("error")))
if not runs:
    bad.append("no fuse run summary under " + root)
if ratios:
    g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print("FIGURE floor_vs_compile_geomean %.3f over %d problems (target >= 1.0, issue 55)" % (g, len(ratios)))
for b in bad:
    print("FAIL: " + b)
print("PASS" if not bad else "FAIL (%d)" % len(bad))
sys.exit(1 if bad else 0)
EOF
