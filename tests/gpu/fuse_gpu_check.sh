#!/usr/bin/env bash
# GPU check of agents/fuse.lua (needs a GPU; exits 77 = skipped without one): the three fuse
# examples (GEMM+bias+GELU+scale, conv+BN+ReLU, MLP) at their GPU sizes in bf16, with the FAKE
# LLM server answering with scripted decompositions and Triton kernels
# (tests/fixtures/fuse/triton/). Each must end with a verified composed program whose hot path
# holds only the subgraph kernels (fallback audit: no library kernel; traced forward: no other
# call), with complete traces; FIGURE lines give eager, torch.compile and composed times. Then
# agents/beam.lua starts from the composed GEMM program for one round.
# KAGENT_FUSE_CHECK_STEPS=gemm,conv,mlp,beam picks steps; KAGENT_FUSE_CHECK_DTYPE=bf16 the dtype.
# Usage: tests/gpu/fuse_gpu_check.sh [out_dir]   (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-fuse-gpu-check}"
rm -rf "$OUT" && mkdir -p "$OUT"
export KAGENT_BIN="$BIN"
"$BIN" --env-file /dev/null tests/gpu/fuse_gpu_check.lua "$OUT"
