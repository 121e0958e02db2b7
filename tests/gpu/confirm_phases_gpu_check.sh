#!/usr/bin/env bash
# GPU check of where a final confirmation's time goes (#29; exits 77 = skipped without a GPU):
# showcase #4 (bf16, its first kernel, --rounds 0: the start, then the confirmation) run twice on
# one fresh memory database. The first run measures everything; the second reuses the cached
# baselines (after an eager re-check) and the kernel's sanitizer and resized-problem verdicts, and
# re-times the figure. Prints, for each run, the time split (baselines / search / confirmation),
# the confirmation's phases (summary.json confirm_phases: the interleaved ranking, the
# confirmation job's wall, the reference's and baselines' share, the evaluator's stage seconds,
# the input's re-time) and last a table of both. Target (issue #29): confirmation <= 20 s.
# About 3 minutes on an H100.
# Usage: tests/gpu/confirm_phases_gpu_check.sh [folder] [more tune.lua options]
#        (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-confirm-phases}"
shift || true
rm -rf "$OUT"
mkdir -p "$OUT"
rc=0
for pass in first second; do
  "$BIN" agents/tune.lua --problem examples/problems/4_matmul_gemv.py --kernel examples/kernels/4_matmul_gemv.py \
    --dtype bf16 --rounds 0 --out "$OUT/$pass" --db "$OUT/kagent.db" "$@" > "$OUT/$pass.log" 2>&1 || rc=1
  tail -n 3 "$OUT/$pass.log"
done
python3 - "$OUT" <<'PY' || rc=1
import glob, json, os, sys
out = sys.argv[1]
def f(v):
    return "%.1f" % v if isinstance(v, (int, float)) else "-"
rows, bad = [], []
for p in ("first", "second"):
    found = glob.glob(os.path.join(out, p, "*", "summary.json"))
    if not found:
        bad.append("%s: no summary.json" % p); continue
    s = json.load(open(found[0]))
    ts, ph = s.get("time_split") or {}, s.get("confirm_phases") or {}
    fin = (ph.get("finalists") or [{}])[-1]
    stages = fin.get("stage_s") or {}
    top = sorted(((v, k) for k, v in stages.items() if isinstance(v, (int, float))), reverse=True)[:6]
    print("== %s run: %s, baselines %s (start %s), verdicts %s" % (p, s.get("status"),
          (s.get("baselines") or {}).get("source"), (s.get("baselines") or {}).get("input_source"),
          s.get("confirmation_verdicts")))
    print("   evaluator stages of the confirmation job (s): " + ", ".join("%s %.1f" % (k, v) for v, k in top))
    rows.append((p, ts, ph, fin, s))
    if s.get("status") != "done":
        bad.append("%s: status %s: %s" % (p, s.get("status"), s.get("error")))
print()
print("| run | baselines s | confirmation s | rank s | confirm job s | reference s | elapsed s | input re-time s | baselines | verdicts reused |")
print("|---|---|---|---|---|---|---|---|---|---|")
for p, ts, ph, fin, s in rows:
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (p, f(ts.get("baselines_s")), f(ts.get("confirm_s")),
          f(ph.get("rank_s")), f(fin.get("wall_s")), f(fin.get("reference_s")), f(fin.get("elapsed_s")),
          f(ph.get("input_s")), fin.get("baselines") or "-", ",".join(fin.get("reused") or []) or "-"))
if len(rows) == 2:
    a, b = rows[0][1].get("confirm_s"), rows[1][1].get("confirm_s")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0:
        print("confirmation, second / first: %.2fx (%.1f s vs %.1f s; target <= 20 s)" % (b / a, b, a))
    if rows[1][4].get("confirmation_verdicts") != "cached":
        bad.append("second run: verdicts %s, not cached" % rows[1][4].get("confirmation_verdicts"))
for x in bad:
    print("FAIL", x)
sys.exit(1 if bad else 0)
PY
exit $rc
