#!/usr/bin/env bash
# luacheck (.luacheckrc) over the agents, the skills and the Lua half of the runtime; skipped (77)
# without Debian's lua-check (scripts/setup.sh --tests installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v luacheck >/dev/null || { echo "SKIP: no luacheck (Debian: lua-check)"; exit 77; }
luacheck --no-color agents skills src/runtime/lua_lib
