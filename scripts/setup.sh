#!/usr/bin/env bash
# Installs the Debian packages kagent-rt needs (when missing) and builds it into build/.
# Usage: scripts/setup.sh            (uses sudo when not root)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config luajit libluajit-5.1-dev nlohmann-json3-dev
          libcli11-dev catch2 libspdlog-dev libfmt-dev libcurl4-openssl-dev libsqlite3-dev
          libssl-dev python3 python3-numpy python3-torch
          python3-pip python3-setuptools python3-wheel dpkg-dev file slurm-wlm munge
          lua-argparse lua-check zsh fish chromium)
# dpkg-dev and file: CPack's .deb (dpkg-shlibdeps); pip, setuptools, wheel: `pip install
# ./src/gpu/eval` offline; slurm-wlm, munge: the single-node Slurm of tests/slurm/; lua-argparse:
# the agents' option parser, compiled into the binary; lua-check: tests/tools/luacheck_check.sh; zsh, fish: the completion scripts' checks;
# chromium (and node, below): the headless browser test of the HTML reports (tests/browser/).
# node with npm from Debian unless one is installed already (another packaging of node may
# conflict with Debian's npm)
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
# lua-language-server (tests/tools/luals_check.sh) is in neither Debian 12 nor npm; that check
# reports skipped without it.
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# playwright-core (pinned in tests/browser/package-lock.json) drives chromium in the browser test;
# without the npm registry the test reports itself skipped
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error --fetch-timeout=60000 --fetch-retries=1) ||
    echo "setup: npm ci in tests/browser failed: the browser test will be skipped"
fi

cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)"
echo "setup: built build/kagent-rt ($(./build/kagent-rt --version))"
