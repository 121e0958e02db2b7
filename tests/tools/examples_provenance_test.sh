#!/usr/bin/env bash
# examples/problems/36_rmsnorm.py is KernelBench's level1 file unchanged: its sha256 is the one
# examples/README.md states, and KernelBench's license is beside it.
set -euo pipefail
cd "$(dirname "$0")/../.."
want=$(grep -o 'sha256 `[0-9a-f]\{64\}`' examples/README.md | grep -o '[0-9a-f]\{64\}')
got=$(sha256sum examples/problems/36_rmsnorm.py | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "examples/problems/36_rmsnorm.py: sha256 $got, examples/README.md says $want"; exit 1; }
grep -q "^MIT License" examples/problems/LICENSE.KernelBench || { echo "no KernelBench license beside it"; exit 1; }
echo "36_rmsnorm.py is KernelBench's level1 file ($got)"
