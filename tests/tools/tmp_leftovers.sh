#!/usr/bin/env bash
# ctest's last test: every test ran with TMPDIR=DIR; anything still there was left by a test that
# does not clean up after itself. Lists it, removes DIR, and fails if there was any.
# Kept by design, so not counted: kagent-eval-<uid>/ (the evaluator's per-user sandbox folder,
# kagent_eval/sandbox/jail.py: its caches stay, its job-* folders must not) and torch's compile caches
# (torchinductor_*).
set -euo pipefail
dir=$1
[ -d "$dir" ] || { echo "tmp leftovers: $dir does not exist (was tmp.setup run?)"; exit 1; }
left=$(find "$dir" -mindepth 1 -maxdepth 1 ! -name 'kagent-eval-*' ! -name 'torchinductor_*' -printf '%f\n' | sort)
jobs=$(find "$dir" -mindepth 2 -maxdepth 2 -path "$dir/kagent-eval-*/job-*" -printf '%P\n' | sort)
left=$(printf '%s\n%s\n' "$left" "$jobs" | sed '/^$/d')
rm -rf "$dir"
if [ -n "$left" ]; then
  echo "tests left these in TMPDIR ($dir):"
  echo "$left" | sed 's/^/  /'
  exit 1
fi
echo "tmp leftovers: none"
