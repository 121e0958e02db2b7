#!/usr/bin/env bash
# Runs the main job on an example problem with the best this machine allows, in the current
# folder (the run goes to ./runs/, ./.env is read by kagent-rt, where the environment wins):
#   GPU + LLM  -> agents/beam.lua on showcase problem 36 (RMSNorm, bf16) with its Triton kernel
#   GPU only   -> the same problem through the LLM-free tuner (beam.lua says so and falls back)
#   no GPU     -> CPU mode (torch on the CPU, pure-PyTorch candidates) on KernelBench's diag(A) @ B
#                 (level 1 #12) at 256 x 256, from a kernel that never builds the diagonal matrix
# It ends with one line (demo_verdict) that says whether the confirmed kernel beats eager, and if
# not, why.
# Extra arguments go to beam.lua (e.g. --rounds 2 --model anthropic:claude-sonnet-4-5).
# Works from a checkout (scripts/demo.sh, with build/kagent-rt) and installed
# (<prefix>/share/kagent-rt/demo.sh, with <prefix>/bin/kagent-rt).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -d "$here/../agents" ] && [ -d "$here/../src/gpu/eval" ]; then
  data="$here/.." bin="$here/../build/kagent-rt"
  [ -x "$bin" ] || { echo "demo: build/kagent-rt is missing: run scripts/setup.sh first" >&2; exit 2; }
else
  data="$here" bin="$here/../../bin/kagent-rt"
  [ -x "$bin" ] || { echo "demo: no kagent-rt beside $here (expected $bin)" >&2; exit 2; }
fi

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then has_gpu=1; fi
if [ "$has_gpu" = 1 ]; then
  problem=36_rmsnorm.py kernel=36_rmsnorm.py dtype=bf16
else
  echo "demo: no GPU found: running in CPU mode (torch on the CPU, pure-PyTorch candidates," >&2
  echo "demo: wall-clock CPU timings, no hardware counters) on KernelBench's diag(A) @ B at 256 x 256," >&2
  echo "demo: from a kernel that scales B's rows instead of multiplying by the diagonal matrix." >&2
  problem=diag_matmul_small.py kernel=cpu/diag_matmul_small.py dtype=fp32
  if [ -z "${KAGENT_PYTHON:-}" ] && [ -x /usr/bin/python3 ]; then export KAGENT_PYTHON=/usr/bin/python3; fi
fi
# Without an LLM beam.lua names the variables to set and runs the LLM-free tuner.
before=$(ls -d runs/*/ 2>/dev/null || true)
code=0
"$bin" agents/beam.lua --problem "$data/examples/problems/$problem" \
  --kernel "$data/examples/kernels/$kernel" --dtype "$dtype" --rounds 3 "$@" || code=$?
# the run this demo made: the folder under ./runs that was not there before (--out elsewhere: none)
run=$(comm -13 <(printf '%s\n' "$before" | sort) <(ls -d runs/*/ 2>/dev/null | sort) | tail -n 1)
python=${KAGENT_PYTHON:-python3}
# demo_verdict: the one line that says what the demo showed, from the run's summary.json
if [ -n "$run" ] && [ -f "$run/summary.json" ] && command -v "$python" >/dev/null 2>&1; then
  "$python" - "$run" "$has_gpu" <<'PY' || true
import json, sys
run, gpu = sys.argv[1].rstrip("/"), sys.argv[2] == "1"
s = json.load(open(run + "/summary.json"))
x = s.get("speedup_vs_eager")
if s.get("verified") is not True:
    print("demo: no confirmed kernel, so no figure (the run's last line says why)")
elif not isinstance(x, (int, float)):
    print("demo: confirmed, but eager could not be timed beside it, so there is no x eager (%s)" % run)
elif x > 1:
    print("demo: the confirmed kernel runs %.2fx as fast as PyTorch eager on this problem, verified and timed "
          "as eager was (%s/report.html)" % (x, run))
elif gpu:
    print("demo: the confirmed kernel is %.2fx eager, no gain on this GPU this time (%s/report.html)" % (x, run))
else:
    print("demo: the confirmed kernel is %.2fx eager, no gain: in CPU mode a candidate is pure PyTorch, so it "
          "cannot beat eager where eager's forward is already the fastest op sequence (%s/report.html)" % (x, run))
PY
fi
exit "$code"
