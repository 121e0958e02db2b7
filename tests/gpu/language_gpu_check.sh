#!/usr/bin/env bash
# GPU check of --language cuda (needs a GPU; exits 77 = skipped without one), with the FAKE LLM
# server (tests/fixtures/fake_llm/server.py) answering with CUDA C++ kernels written as
# KernelBench's load_inline files (tests/fixtures/agent/cuda/):
#  1. agents/beam.lua --language cuda on KernelBench #36 (fp32), no --kernel: the seed's reply
#     states its granularity and does not compile (nvcc); the repair prompt carries nvcc's error,
#     cut; the repaired kernel verifies and is confirmed, with the sanitizer's verdict, the own
#     share of its GPU time and the compile stage in its results.
#  2. agents/skill.lua --language cuda --rounds 1 on examples/problems/l2_gemm_bias_gelu_scale.py
#     (fp32) from an own tiled CUDA GEMM (tests/fixtures/agent/cuda/gemm_bias_gelu_scale_cuda.py):
#     the fake planner picks skill tf32_gemm (asserted where the profile's retrieval allows it;
#     the allowed skills are printed), the fake optimizer answers with the cuBLAS GEMM plus its own
#     epilogue (examples/kernels/cuda/l2_gemm_bias_gelu_scale_cublas.py), which wins, verified and
#     confirmed under skill.lua's default policy, some, with own_share < 0.5 and the cuBLAS kernel
#     named in library_kernels; a FIGURE line gives input ms, best ms and the own share.
# KAGENT_LANGUAGE_CHECK_STEPS=beam,skill picks steps.
# Usage: tests/gpu/language_gpu_check.sh [out_dir]   (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-language-gpu-check}"
rm -rf "$OUT" && mkdir -p "$OUT"
export KAGENT_BIN="$BIN"
"$BIN" --env-file /dev/null tests/gpu/language_gpu_check.lua "$OUT"
