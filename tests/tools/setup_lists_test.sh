#!/usr/bin/env bash
# scripts/setup.sh: the plain setup (build and demo) wants none of the packages only tests need,
# the README lists every package either setup wants, and .ci/run runs the README's test command.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=$(scripts/setup.sh --list)
all=$(scripts/setup.sh --tests --list)
fail=0
for p in slurm-wlm munge chromium zsh fish nodejs npm lua-check python3-pip dpkg-dev; do
  if grep -qx "$p" <<<"$base"; then echo "setup without --tests wants $p (only tests need it)"; fail=1; fi
done
for p in slurm-wlm munge chromium zsh fish; do
  grep -qx "$p" <<<"$all" || { echo "setup --tests does not want $p"; fail=1; }
done
section=$(sed -n '/^### What setup installs/,/^## /p' README.md)
for p in $all nodejs npm; do
  grep -q "\b$p\b" <<<"$section" || { echo "README.md, What setup installs, does not list $p"; fail=1; }
done
cmd=$(sed -n 's/^\(scripts\/setup\.sh --tests && scripts\/test\.sh\)$/\1/p' README.md | head -1)
[ -n "$cmd" ] || { echo "README.md has no test command 'scripts/setup.sh --tests && scripts/test.sh'"; fail=1; }
grep -qxF "$cmd" .ci/run || { echo ".ci/run does not run the README's test command ($cmd)"; fail=1; }
[ "$fail" = 0 ] && echo "setup lists: ok ($(wc -l <<<"$base") packages for the build and demo, $(wc -l <<<"$all") with --tests)"
exit "$fail"
