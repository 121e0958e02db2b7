#!/usr/bin/env bash
# GPU check of Levels 2 and 3 (exits 77 = skipped without a GPU): agents/sweep.lua --policy fuse
# with NO LLM (-- --no-llm) over KernelBench Level 2 and Level 3, fp32: each problem decomposed by
# the FX splitter, a first program of TorchInductor Triton kernels per subgraph (library kernels
# allowed and reported as such, --first-library allow), verified and audited, timed beside eager
# and torch.compile. Then the same over the quick set with --first reference: programs made of the
# reference's own operations, whose time against eager is what composing costs (target: within
# 2%, geomean). Prints the sweep tables, then FIGURE lines and PASS/FAIL against the targets.
#   KAGENT_L23_MODE=quick (20 problems: 15 of Level 2, 5 of Level 3) | full (all 150) | l3layers
#   (the 17 Level 3 problems with recurrent layers, attention called with (q, k, v), Transformer
#   layers, control flow on shapes or einops, which the analysis's functional forms and concrete
#   trace decompose: docs/results/2026-11-27-levels3-leaf.md)
#   KAGENT_L23_DEVICES=0 (GPUs dealt to the runs; "0,1" on two) KAGENT_L23_CONCURRENT (runs at
#   once; default two per GPU: more oversubscribe the host's CPUs with compiles, and the worker's
#   clock then cannot check figures, docs/lua-api.md `clock_unchecked`)
#   KAGENT_KERNELBENCH=<folder with level2/ and level3/> (default ../shared/data/kernelbench, then
#   .kb/kernelbench: carry a copy there where ../shared does not travel)
#   KAGENT_L23_MAX_AUTOTUNE=1 also times torch.compile(mode="max-autotune") (slow)
# Usage: tests/gpu/levels23_gpu_check.sh [out_dir]   (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-levels23}"
MODE="${KAGENT_L23_MODE:-quick}"
DEV="${KAGENT_L23_DEVICES:-0}"
NGPU=$(echo "$DEV" | tr ',' '\n' | grep -c .)
CONC="${KAGENT_L23_CONCURRENT:-$((2 * NGPU))}"
KB="${KAGENT_KERNELBENCH:-}"
for c in ../shared/data/kernelbench .kb/kernelbench shared/data/kernelbench; do
  [ -z "$KB" ] && [ -d "$c/level2" ] && KB="$c"
done
[ -d "$KB/level2" ] || { echo "SKIP: no KernelBench folder (set KAGENT_KERNELBENCH)"; exit 77; }
mkdir -p "$OUT"
LIST="$OUT/problems_$MODE.txt"
if [ "$MODE" = full ]; then
  ls "$KB"/level2/*.py "$KB"/level3/*.py | xargs -n1 realpath > "$LIST"
elif [ "$MODE" = l3layers ]; then
  : > "$LIST"
  for n in 28 29 30 31 32 34 36 37 38 39 40 41 42 46 47 48 49; do realpath "$KB"/level3/${n}_*.py >> "$LIST"; done
else
  # a fixed spread: every seventh Level 2 problem and every tenth of Level 3, by number
  : > "$LIST"
  for n in 1 8 15 22 29 36 43 50 57 64 71 78 85 92 99; do realpath "$KB"/level2/${n}_*.py >> "$LIST"; done
  for n in 1 8 11 20 44; do realpath "$KB"/level3/${n}_*.py >> "$LIST"; done
fi
MAT=""
[ "${KAGENT_L23_MAX_AUTOTUNE:-0}" = 1 ] && MAT="--max-autotune"
t0=$(date +%s)
"$BIN" agents/sweep.lua --problems "$LIST" --policy fuse --devices "$DEV" --max-concurrent "$CONC" \
  --out "$OUT/first_$MODE" --db "$OUT/kagent.db" --job-timeout 300 -- --no-llm $MAT
rc1=$?
t1=$(date +%s)
# composition overhead: the quick set, programs of the reference's own ops
RLIST="$OUT/problems_reference.txt"
: > "$RLIST"
for n in 1 8 15 22 29 36 43 50 57 64 71 78 85 92 99; do realpath "$KB"/level2/${n}_*.py >> "$RLIST"; done
"$BIN" agents/sweep.lua --problems "$RLIST" --policy fuse --devices "$DEV" --max-concurrent "$CONC" \
  --out "$OUT/reference" --db "$OUT/kagent.db" --job-timeout 300 -- --no-llm --first reference
rc2=$?
t2=$(date +%s)
python3 - "$OUT/first_$MODE/sweep.json" "$OUT/reference/sweep.json" "$MODE" $((t1 - t0)) $((t2 - t1)) <<'EOF'
import json, sys
first, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
mode, wall1, wall2 = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
bad = []
def f(v):
    return "%.3f" % v if isinstance(v, (int, float)) else "-"
def levels(s):
    out = {}
    for r in s.get("results", []):
        lvl = "level3" if "/level3/" in (r.get("log") or "") or any("/level3/" in p["problem"] for p in s["problems"] if p["name"] == r["name"]) else "level2"
        out.setdefault(lvl, []).append(r)
    return out
import math
def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None
for lvl, rows in sorted(levels(first).items()):
    fz = [r.get("fuse") or {} for r in rows]
    dec = sum(1 for x in fz if x.get("decomposition") == "valid")
    ver = sum(1 for x in fz if x.get("first_verified"))
    ge = geo([x["first_speedup"]["eager"] for x in fz if x.get("first_verified") and x.get("first_speedup", {}).get("eager")])
    gc = geo([x["first_speedup"]["compile"] for x in fz if x.get("first_verified") and x.get("first_speedup", {}).get("compile")])
    print("FIGURE %s %s: decomposed %d/%d, first programs verified %d/%d, geomean x eager %s, x compile %s"
          % (mode, lvl, dec, len(rows), ver, len(rows), f(ge), f(gc)))
    for r, x in zip(rows, fz):
        if not x.get("first_verified"):
            reason = "%s: %s" % (x.get("first_stage"), x.get("first_reason")) if x.get("first_stage") else (r.get("error") or x.get("decomposition"))
            if not reason:
                bad.append("%s: a failure without stage or reason" % r["name"])
            print("  NOT VERIFIED %s: %s" % (r["name"], str(reason)[:300]))
        elif x.get("first_passed_over"):
            print("  PASSED OVER %s: %s" % (r["name"], str(x["first_passed_over"])[:300]))
    if mode == "full":
        need = {"level2": (95, 90), "level3": (40, 35)}[lvl]
        if dec < need[0]: bad.append("%s: %d decomposed, target %d" % (lvl, dec, need[0]))
        if ver < need[1]: bad.append("%s: %d verified, target %d" % (lvl, ver, need[1]))
        if lvl == "level2" and (ge or 0) < 1.0: bad.append("level2: first programs %s x eager, target 1.0" % f(ge))
        if lvl == "level2" and (gc or 0) < 0.9: bad.append("level2: first programs %s x compile, target 0.9" % f(gc))
rz = [r.get("fuse") or {} for r in ref.get("results", [])]
rg = geo([x["first_speedup"]["eager"] for x in rz if x.get("first_verified") and x.get("first_speedup", {}).get("eager")])
print("FIGURE composition overhead (reference-op programs, %d of %d verified): geomean x eager %s (target >= 0.98)"
      % (sum(1 for x in rz if x.get("first_verified")), len(rz), f(rg)))
if rg is None or rg < 0.98:
    bad.append("composition overhead: reference-op programs at %s x eager" % f(rg))
print("FIGURE wall: first programs %d s (%s), reference programs %d s" % (wall1, mode, wall2))
for b in bad:
    print("FAIL " + b)
print("levels23 GPU check: " + ("FAILED" if bad else "passed"))
sys.exit(1 if bad else 0)
EOF
