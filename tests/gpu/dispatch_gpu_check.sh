#!/usr/bin/env bash
# GPU check of least-loaded dispatch (#29; exits 77 = skipped without a GPU): bench/throughput.lua
# on showcase #4 (knob variants of examples/kernels/4_matmul_gemv.py sent at once) with 1 and
# with N workers per GPU, on GPU 0 and, where there are several, on all; then, from its JSON,
# how many jobs each device ran in each configuration (least-loaded dispatch spreads a batch
# over every device). Prints throughput's table (candidates per minute, ratios) and last a table of jobs
# per device. About 5 minutes on one H100, 8 on two.
# Usage: tests/gpu/dispatch_gpu_check.sh [--workers N] [--candidates 16] [--op evaluate|benchmark]
#        (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
JSON="$(mktemp /tmp/kagent-dispatch-XXXXXX.json)"
trap 'rm -f "$JSON"' EXIT
args=("$@")
has_candidates=0
for a in "$@"; do [ "$a" = "--candidates" ] && has_candidates=1; done
[ $has_candidates -eq 1 ] || args+=(--candidates 16)
"$BIN" --env-file /dev/null bench/throughput.lua --devices all "${args[@]}" --json "$JSON"
rc=$?
python3 - "$JSON" <<'PY' || rc=1
import collections, json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print("FAIL: no JSON from bench/throughput.lua (%s)" % e)
    sys.exit(1)
bad = []
print("| configuration | workers per GPU | jobs per device | candidates/min |")
print("|---|---|---|---|")
for c in d.get("configs", []):
    per = collections.Counter(r.get("device") for r in c.get("results", []))
    print("| %s | %s | %s | %.1f |" % (c["label"], c["workers"],
          ", ".join("%s: %d" % (k, v) for k, v in sorted(per.items(), key=lambda kv: str(kv[0]))),
          c.get("per_minute") or 0))
    # every GPU of the pool takes work (first-free dispatch could leave one idle)
    n = int(c["label"].split()[1]) if c["label"].startswith("all ") else 1
    if len(per) < n:
        bad.append("%s x%s: only devices %s ran jobs" % (c["label"], c["workers"], sorted(per)))
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
PY
exit $rc
