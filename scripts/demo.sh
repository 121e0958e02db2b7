#!/usr/bin/env bash
# Runs the main job on an example problem with the best this machine allows, and says what is
# missing:
#   GPU + LLM  -> agents/beam.lua on showcase problem 36 (RMSNorm, bf16) with its Triton kernel
#   GPU only   -> the same problem through the LLM-free tuner (agents/tune.lua)
#   no GPU     -> CPU mode (torch on the CPU, pure-PyTorch candidates) on a small RMSNorm
# Extra arguments go to beam.lua (e.g. --rounds 2 --model anthropic:claude-sonnet-4-5).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/kagent-rt
[ -x "$bin" ] || { echo "demo: build/kagent-rt is missing: run scripts/setup.sh first" >&2; exit 2; }
[ -f .env ] && set -a && . ./.env && set +a

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then has_gpu=1; fi
has_llm=0
if [ -n "${ANTHROPIC_API_KEY:-}${OPENAI_API_KEY:-}${KAGENT_LLM_URL:-}${OPENAI_BASE_URL:-}" ]; then has_llm=1; fi

if [ "$has_gpu" = 1 ]; then
  problem=examples/problems/36_rmsnorm.py kernel=examples/kernels/36_rmsnorm.py dtype=bf16
else
  echo "demo: no GPU found: running in CPU mode (torch on the CPU, pure-PyTorch candidates," >&2
  echo "demo: wall-clock CPU timings, no hardware counters) on a small RMSNorm problem." >&2
  problem=examples/problems/rmsnorm_small.py kernel=examples/kernels/cpu/rmsnorm_small_chunked.py dtype=fp32
  if [ -z "${KAGENT_PYTHON:-}" ] && [ -x /usr/bin/python3 ]; then export KAGENT_PYTHON=/usr/bin/python3; fi
fi
if [ "$has_llm" = 0 ]; then
  echo "demo: no LLM configured (set ANTHROPIC_API_KEY or OPENAI_API_KEY, or KAGENT_LLM_URL for a" >&2
  echo "demo: local OpenAI-compatible server; KAGENT_MODEL=provider:model): beam.lua will fall back" >&2
  echo "demo: to the LLM-free tuner." >&2
fi
exec "$bin" agents/beam.lua --problem "$problem" --kernel "$kernel" --dtype "$dtype" --rounds 3 "$@"
