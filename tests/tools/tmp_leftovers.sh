#!/usr/bin/env bash
# ctest's last test: every test ran with TMPDIR=DIR; anything still there was left by a test that
# does not clean up after itself. Lists it, removes DIR, and fails if there was any.
# Kept by design, so not counted: kagent_eval_src/ (the evaluator's content-addressed cache of
# candidate sources, kagent_eval/loader.py) and torch's compile caches (torchinductor_*).
set -euo pipefail
dir=$1
[ -d "$dir" ] || { echo "tmp leftovers: $dir does not exist (was tmp.setup run?)"; exit 1; }
left=$(find "$dir" -mindepth 1 -maxdepth 1 ! -name kagent_eval_src ! -name 'torchinductor_*' -printf '%f\n' | sort)
rm -rf "$dir"
if [ -n "$left" ]; then
  echo "tests left these in TMPDIR ($dir):"
  echo "$left" | sed 's/^/  /'
  exit 1
fi
echo "tmp leftovers: none"
