#!/usr/bin/env bash
# GPU check of workers sharing one GPU through the lease (needs a GPU; exits 77 = skipped without
# one): 15 Triton matmul jobs through a pool of 1 worker and of 3 on GPU 0; checks that every job
# is verified and timed and that no job's timing overlaps another job's timing or untimed stages;
# prints jobs per minute and the exclusive and shared lease waits for each pool, and the control
# kernel's median alone against inside each batch
# (tests/gpu/lease_gpu_check.lua). About 3 to 5 minutes on an H100.
# Usage: tests/gpu/lease_gpu_check.sh [--workers N] [--op benchmark|evaluate]
#        (KAGENT_BIN overrides build/kagent-rt, KAGENT_PYTHON python3)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
exec "$BIN" --env-file /dev/null tests/gpu/lease_gpu_check.lua "$@"
