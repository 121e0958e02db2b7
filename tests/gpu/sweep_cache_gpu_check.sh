#!/usr/bin/env bash
# GPU check of the measurements kept across runs (#29; exits 77 = skipped without a GPU): the
# one-round tuner sweep of the five showcase problems (as tests/gpu/sweep_gpu_check.sh) twice on
# one memory database: first with nothing cached (baselines and confirmation verdicts measured),
# then again into a second folder (baselines cached after an eager re-check, the same best
# kernels' sanitizer and resized-problem verdicts reused). Prints, for each sweep, every
# problem's wall time split into baselines / search / confirmation, where each confirmation's
# time went (its phases from summary.json confirm_phases), and last a table: sweep wall, the
# sum of each part, and the cached sweep's ratios to the cold one. Targets (issue #29): cold
# sweep <= 4 min, cached <= 3 min, confirmation of #4 <= 20 s.
# Each sweep resumes in its folder: a call cut off by a time limit is continued by running this
# again with the same folder (the split and phases stay per problem); use a fresh folder for a
# clean measurement.
# Usage: tests/gpu/sweep_cache_gpu_check.sh [folder]   (KAGENT_BIN overrides build/kagent-rt;
#        extra sweep options go in KAGENT_SWEEP_ARGS, e.g. "--devices 0")
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-sweep-cache}"
mkdir -p "$OUT"
rc=0
for pass in cold cached; do
  # shellcheck disable=SC2086
  "$BIN" agents/sweep.lua --problems examples/problems/{4,36,43,77,82}_*.py --kernels examples/kernels \
    --policy tune --dtype bf16 --rounds 1 --tune-candidates 4 --metrics sol ${KAGENT_SWEEP_ARGS:-} \
    --out "$OUT/$pass" --db "$OUT/kagent.db" > "$OUT/$pass.log" 2>&1 || rc=1
done
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def f(v, fmt="%.1f"):
    return fmt % v if isinstance(v, (int, float)) else "-"
tot = {}
bad = []
for p in ("cold", "cached"):
    try:
        s = json.load(open(os.path.join(out, p, "sweep.json")))
    except (OSError, ValueError) as e:
        bad.append("%s: no sweep.json (%s)" % (p, e)); continue
    t = {"wall": (s.get("aggregate") or {}).get("wall_s"), "baselines": 0.0, "search": 0.0, "confirm": 0.0}
    print("== %s sweep" % p)
    print("| problem | status | baselines | baselines s | search s | confirmation s | rank s | confirm job s | reference s | verdicts reused |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in s.get("results", []):
        ts = r.get("time_split") or {}
        for k, n in (("baselines", "baselines_s"), ("search", "search_s"), ("confirm", "confirm_s")):
            if isinstance(ts.get(n), (int, float)):
                t[k] += ts[n]
        ph, fin = {}, {}
        try:
            summ = json.load(open(os.path.join(r["run_dir"], "summary.json")))
            ph = summ.get("confirm_phases") or {}
            fin = (ph.get("finalists") or [{}])[-1]
        except (OSError, ValueError, TypeError, KeyError):
            pass
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (r.get("name"), r.get("status"),
              r.get("baselines_source") or "-", f(ts.get("baselines_s")), f(ts.get("search_s")),
              f(ts.get("confirm_s")), f(ph.get("rank_s")), f(fin.get("wall_s")), f(fin.get("reference_s")),
              ",".join(fin.get("reused") or []) or "-"))
        if r.get("status") != "done" or r.get("verified") is not True:
            bad.append("%s %s: %s, verified %s" % (p, r.get("name"), r.get("status"), r.get("verified")))
        if p == "cached" and r.get("baselines_source") not in ("cached", "remeasured"):
            bad.append("cached %s: baselines %s" % (r.get("name"), r.get("baselines_source")))
    tot[p] = t
print()
print("| sweep | wall s | baselines s | search s | confirmation s |")
print("|---|---|---|---|---|")
for p, t in tot.items():
    print("| %s | %s | %s | %s | %s |" % (p, f(t["wall"]), f(t["baselines"]), f(t["search"]), f(t["confirm"])))
if "cold" in tot and "cached" in tot:
    c, w = tot["cold"], tot["cached"]
    def ratio(k):
        return "%.2f" % (w[k] / c[k]) if c[k] and w[k] is not None and c[k] > 0 else "-"
    print("| cached / cold | %s | %s | %s | %s |" % (ratio("wall"), ratio("baselines"), ratio("search"), ratio("confirm")))
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
PY
[ $? -eq 0 ] || rc=1
exit $rc
