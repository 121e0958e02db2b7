#!/usr/bin/env bash
# Installs the Debian packages kagent-rt needs (when missing) and builds it into build/.
# Usage: scripts/setup.sh            what the build and scripts/demo.sh need
#        scripts/setup.sh --tests    that, and what only the tests need (scripts/test.sh)
#        scripts/setup.sh [--tests] --list   the packages it would want, one a line; no change
# Uses sudo when not root. No service is enabled or left running: the Slurm test starts its own
# daemons. README.md, "What setup installs", lists the packages and why.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0 list=0
for a in "$@"; do
  case "$a" in
    --tests) tests=1 ;;
    --list) list=1 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown argument '$a' (--tests, --list or nothing)" >&2; exit 2 ;;
  esac
done

# The build: compiler and CMake, and the libraries compiled in (LuaJIT, SQLite, yaml-cpp statically;
# lua-argparse, the agents' option parser; catch2 for the C++ tests built with the binary).
packages=(build-essential cmake ninja-build pkg-config luajit libluajit-5.1-dev nlohmann-json3-dev
          libcli11-dev catch2 libspdlog-dev libfmt-dev libcurl4-openssl-dev libsqlite3-dev
          libyaml-cpp-dev libssl-dev lua-argparse python3 python3-numpy)
# The demo (and the evaluator): a python with torch. Debian's CPU build (python3-torch, with
# many dependencies of its own) only when neither KAGENT_PYTHON nor python3 has torch already.
has_torch() { [ -n "$1" ] && "$1" -c "import torch" >/dev/null 2>&1; }
if [ "$list" = 1 ] || { ! has_torch "${KAGENT_PYTHON:-}" && ! has_torch python3 && ! has_torch /usr/bin/python3; }; then
  packages+=(python3-torch)
fi
# KernelBench's C++ candidates (load_inline with cpp_sources) build in CPU mode against torch's
# C++ headers, which Debian's torch keeps in libtorch-dev (src/gpu/eval/README.md), and
# torch/extension.h includes pybind11's, which libtorch-dev does not bring
if [ "$list" = 1 ] || [[ " ${packages[*]} " == *" python3-torch "* ]] || dpkg -s python3-torch >/dev/null 2>&1; then
  packages+=(libtorch-dev pybind11-dev)
fi
if [ "$tests" = 1 ]; then
  # dpkg-dev, file: CPack's .deb (dpkg-shlibdeps); pip, setuptools, wheel: `pip install
  # ./src/gpu/eval` offline; slurm-wlm, munge: the single-node Slurm of tests/slurm/; zsh,
  # fish: the completion scripts' checks; chromium (and node): the headless browser test of the
  # HTML reports (tests/browser/); lua-check: the Lua lint (.luacheckrc); tmux, openssh-client:
  # a tmux server and an ssh-agent the hostile candidates must not reach (tests/eval/hostile_escape.py).
  packages+=(python3-pip python3-setuptools python3-wheel dpkg-dev file slurm-wlm munge zsh fish
             chromium lua-check tmux openssh-client)
  # node with npm from Debian unless one is installed already (another packaging of node may
  # conflict with Debian's npm)
  command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
  # lua-language-server (tests/tools/luals_check.sh) is in neither Debian 12 nor npm; that
  # check reports skipped without it.
fi

if [ "$list" = 1 ]; then printf '%s\n' "${packages[@]}"; exit 0; fi

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
  # The daemons of the packages just installed (slurm-wlm, munge) are neither enabled at boot
  # nor left running: the Slurm test starts its own, in a folder of its own.
  for s in slurmctld slurmd munge; do
    case " ${missing[*]} " in *" slurm-wlm "*|*" munge "*) ;; *) continue ;; esac
    [ -e "/lib/systemd/system/$s.service" ] || continue
    if [ -d /run/systemd/system ]; then $sudo systemctl disable --now "$s" >/dev/null 2>&1 || true
    else
      $sudo systemctl disable "$s" >/dev/null 2>&1 || true
      [ -x "/etc/init.d/$s" ] && $sudo "/etc/init.d/$s" stop >/dev/null 2>&1 || true
    fi
  done
fi

# playwright-core (pinned in tests/browser/package-lock.json) drives chromium in the browser test;
# without the npm registry the test reports itself skipped
if [ "$tests" = 1 ] && [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error --fetch-timeout=60000 --fetch-retries=1) ||
    echo "setup: npm ci in tests/browser failed: the browser test will be skipped"
fi

cmake --preset default >/dev/null
cmake --build --preset default -j"$(nproc)"
echo "setup: built build/kagent-rt ($(./build/kagent-rt --version))"
