#!/usr/bin/env bash
# luacheck with the project's .luacheckrc over agents/, skills/ and the Lua library:
# undefined globals, unused or shadowed variables, unreachable code. Exit 77 (skipped) when
# luacheck is not installed (Debian: lua-check; scripts/setup.sh --tests installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v luacheck >/dev/null || { echo "SKIP: luacheck is not installed (apt-get install lua-check)"; exit 77; }
luacheck --no-color --codes agents skills src/runtime/lua_lib
