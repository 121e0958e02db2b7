#!/usr/bin/env bash
# Machine noise is not a verdict on a kernel (src/gpu/eval/README.md, "Fail closed"; issue #52):
# an honest kernel checked with `kagent-eval check` N times while a CPU hog (a busy loop) runs
# pinned to the same core as the worker and all its children. Every check must end verified or
# "not measured" (ENOISY); a refusal (any other failure) fails the benchmark (exit 1).
#
#   bash bench/noise_hog.sh [N=10] [PROBLEM] [KERNEL] [CORE=0]
#
# Defaults: the CPU softmax example. KAGENT_PYTHON picks the python (default /usr/bin/python3).
# Prints one line per check (its verdict, code, median or error) and the counts.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10}
PROBLEM=${2:-examples/problems/softmax.py}
KERNEL=${3:-examples/kernels/cpu/softmax.py}
CORE=${4:-0}
PY=${KAGENT_PYTHON:-/usr/bin/python3}
command -v taskset >/dev/null || { echo "SKIP: no taskset (util-linux)"; exit 77; }
"$PY" -c "import torch" 2>/dev/null || { echo "SKIP: no torch for $PY"; exit 77; }

taskset -c "$CORE" sh -c 'while :; do :; done' &
HOG=$!
ERR=$(mktemp)
trap 'kill "$HOG" 2>/dev/null || true; rm -f "$ERR"' EXIT
echo "CPU hog pid $HOG pinned to core $CORE; $N checks of $KERNEL on the same core"

verified=0 not_measured=0 refused=0
for i in $(seq 1 "$N"); do
  out=$(taskset -c "$CORE" env PYTHONPATH="$PWD/src/gpu/eval" "$PY" -m kagent_eval check "$PROBLEM" "$KERNEL" \
        --device cpu --json 2>"$ERR" || true)
  line=$(printf '%s' "$out" | ERR="$ERR" "$PY" -c '
import json, os, sys
try:
    r = json.load(sys.stdin)
except ValueError:
    tail = open(os.environ["ERR"]).read()[-300:].replace("\n", " ")
    print("refused none no JSON from kagent-eval check:", tail); sys.exit()
t = (r.get("time_ms") or {})
kind = "verified" if r.get("ok") else ("not_measured" if r.get("code") == "ENOISY" else "refused")
rounds = [x.get("machine_noisy") for x in (r.get("trust") or {}).get("rounds") or []]
print(kind, r.get("code") or "-", "median %s ms p90/p10 %s" % (t.get("median"), t.get("spread")) if r.get("ok")
      else (r.get("error") or "")[:300], "| control rounds (machine noisy):", rounds)
')
  echo "$i $line"
  case "${line%% *}" in
    verified) verified=$((verified + 1)) ;;
    not_measured) not_measured=$((not_measured + 1)) ;;
    *) refused=$((refused + 1)) ;;
  esac
done
echo "verified $verified, not measured $not_measured, refused $refused of $N (CPU hog on core $CORE)"
[ "$refused" -eq 0 ]
