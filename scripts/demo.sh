#!/usr/bin/env bash
# Runs the main job on an example problem with the best this machine allows, in the current
# folder (the run goes to ./runs/, ./.env is read by kagent-rt, where the environment wins):
#   GPU + LLM  -> agents/beam.lua on showcase problem 36 (RMSNorm, bf16) with its Triton kernel
#   GPU only   -> the same problem through the LLM-free tuner (beam.lua says so and falls back)
#   no GPU     -> CPU mode (torch on the CPU, pure-PyTorch candidates) on a small RMSNorm
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
  echo "demo: wall-clock CPU timings, no hardware counters) on a small RMSNorm problem." >&2
  problem=rmsnorm_small.py kernel=cpu/rmsnorm_small_chunked.py dtype=fp32
  if [ -z "${KAGENT_PYTHON:-}" ] && [ -x /usr/bin/python3 ]; then export KAGENT_PYTHON=/usr/bin/python3; fi
fi
# Without an LLM beam.lua names the variables to set and runs the LLM-free tuner.
exec "$bin" agents/beam.lua --problem "$data/examples/problems/$problem" \
  --kernel "$data/examples/kernels/$kernel" --dtype "$dtype" --rounds 3 "$@"
