#!/usr/bin/env bash
# GPU check of the optimization agent (needs a GPU; exits 77 = skipped without one):
#  1. agents/beam.lua on KernelBench #36 (bf16) from a slow two-pass Triton kernel, with the FAKE
#     LLM server replaying a known-faster one-pass kernel: that kernel must end as best, verified,
#     timed against eager and torch.compile, with a complete run directory and summary.json.
#  2. agents/tune.lua (no LLM) on examples/kernels/36_rmsnorm.py: prints the figure.
#  3. agents/generate.lua on #36 (bf16) with the fake server answering with the one-pass kernel:
#     the winner verifies on the GPU and is timed against both baselines.
#  4. agents/skill.lua on #36 (bf16) from the two-pass kernel with the fake server planning and
#     replaying the one-pass kernel: retrieval on real counters, plans with evidence, best verified.
#  5. trust: agents/beam.lua on softmax 4096x4096 (fp32) with the fake server answering with an
#     honest one-pass kernel and three side-stream/thread copies: the honest one ends as best,
#     each copy is rejected at stage "timing", and no figure of theirs reaches summary or memory.
#  5b. stale: the same, the fake server answering with the honest kernel and a copy that returns
#     its previous output on one timed call in sixteen: the copy is refused (ESTALE), the honest
#     kernel ends as best.
#  6. resume: agents/beam.lua on #36 (bf16), two rounds, killed with SIGKILL in round 2, then
#     --resume: two rounds with the run's own options, the database and summary.json agreeing.
# KAGENT_AGENT_CHECK_STEPS=beam,tune,generate,skill,trust,stale,resume picks steps.
# Usage: tests/gpu/agent_gpu_check.sh [out_dir]   (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-agent-gpu-check}"
rm -rf "$OUT" && mkdir -p "$OUT"
export KAGENT_BIN="$BIN"
"$BIN" --env-file /dev/null tests/gpu/agent_gpu_check.lua "$OUT"
