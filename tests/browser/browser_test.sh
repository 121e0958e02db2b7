#!/usr/bin/env bash
# The HTML reports in a real browser: Debian's chromium, headless, driven by playwright-core
# (tests/browser/check_pages.js), opens a CPU run's report.html and runs/index.html as the run
# wrote them, and a FAKE GPU run's report (roofline, failed attempts, a diff of two kernels);
# then tests/browser/check_live.js: a running run's page updating itself, an attempt's links, and
# sorting and filtering an index of FAKE runs.
# Fails on any console or page error and on any request that leaves the disk; checks that every
# chart is drawn, every table has rows and the diff is drawn (and, for the fake run, highlighted;
# the CPU run's best may be its input when a loaded machine fails the final re-measure).
# Screenshots: $KAGENT_BUILD_DIR/test-output/browser/.
# Skipped (77) without chromium, node, playwright-core (npm ci in tests/browser; scripts/setup.sh --tests
# does both), with a node older than playwright-core needs, or without a python with torch.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${KAGENT_BUILD_DIR:-$root/build}
chromium=${KAGENT_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || { echo "SKIP: no chromium at $chromium (scripts/setup.sh --tests installs it)"; exit 77; }
command -v node >/dev/null || { echo "SKIP: no node (scripts/setup.sh --tests installs it)"; exit 77; }
pw=$root/tests/browser/node_modules/playwright-core
[ -d "$pw" ] || { echo "SKIP: no playwright-core: run 'npm ci' in tests/browser (scripts/setup.sh --tests does)"; exit 77; }
# playwright-core names the node it needs (engines.node, ">=N"); an older node cannot run it
need=$(node -p "(require('$pw/package.json').engines || {}).node || ''" | sed -n 's/^>=\([0-9]*\).*/\1/p')
have=$(node -p 'process.versions.node.split(".")[0]')
[ -z "$need" ] || [ "$have" -ge "$need" ] ||
  { echo "SKIP: node $(node --version) is older than playwright-core needs (node >= $need)"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shots=$build/test-output/browser
rm -rf "$shots"
mkdir -p "$shots"

set +e
run=$("$build/kagent-rt" --log-level warn "$root/tests/browser/make_runs.lua" "$work")
code=$?
set -e
[ $code -eq 77 ] && { echo "SKIP: no python with torch for the CPU run (set KAGENT_PYTHON)"; exit 77; }
[ $code -eq 0 ] || { echo "the runs for the browser test failed (exit $code)"; exit 1; }

report='{"name":"cpu_run_report","charts":["spec-convergence","spec-lineage","spec-tokens"],"tables":["rounds","metrics","usage"],"diff":true,"text":["Convergence","Lineage","Attempts by round","Kernel diff"]}'
index='{"name":"cpu_runs_index","tables":["runs"],"text":["kagent-rt runs"]}'
many='{"name":"many_runs_index","charts":["spec-speedups"],"tables":["runs"],"text":["Confirmed speedups of every run"]}'
gpu='{"name":"fake_gpu_run_report","charts":["spec-convergence","spec-lineage","spec-roofline","spec-tokens"],"tables":["rounds","metrics","usage"],"diff":"highlighted","text":["failed at timing","failed attempts (no time)"]}'
node "$root/tests/browser/check_pages.js" "$shots" \
  "$run/report.html" "$report" \
  "$(dirname "$run")/index.html" "$index" \
  "$work/gpu_runs/fake_20261123-120000_abcd/report.html" "$gpu" \
  "$work/many/index.html" "$many"
# a running run's page updating itself, an attempt's links, sorting and filtering the index
node "$root/tests/browser/check_live.js" "$shots" "$build/kagent-rt" "$work/live/$(basename "$run")" \
  "$run/report.html" "$work/many/index.html"
echo "screenshots: $shots"
