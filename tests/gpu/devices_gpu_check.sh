#!/usr/bin/env bash
# GPU check of GPU selection (needs a GPU; exits 77 = skipped without one): the evaluator pool
# with CUDA_VISIBLE_DEVICES unset, set to 0, set to the first GPU's UUID (and to 1 where there is a
# second GPU), and set to "" (no GPU allowed: CPU mode). Each GPU case verifies and times a Triton
# ReLU and checks that the result names the GPU the mask allows (result.device, result.gpu), and
# that CUDA, given the worker's mask, sees that same GPU (name and UUID from torch).
# Usage: tests/gpu/devices_gpu_check.sh   (KAGENT_BIN overrides build/kagent-rt, KAGENT_PYTHON python3)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
export KAGENT_BIN="$BIN"
unset CUDA_VISIBLE_DEVICES  # the driver lists every GPU; each case sets its own mask
exec "$BIN" --env-file /dev/null tests/gpu/devices_gpu_check.lua
