#!/usr/bin/env bash
# agents/sweep.lua --policy fuse -- --no-llm as a job array on the test's own single-node Slurm
# (tests/slurm/sweep_slurm_test.sh starts and stops it), CPU mode: tests/slurm/fuse_slurm_check.lua.
exec bash "$(dirname "$0")/sweep_slurm_test.sh" tests/slurm/fuse_slurm_check.lua
