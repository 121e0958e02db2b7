-- luacheck (Debian: lua-check) over the scripts users read and copy: agents/, skills/, the Lua
-- library and the specs. tests/tools/luacheck_check.sh runs it in the suite.
std = "luajit"
globals = { "kagent" }
-- Unused arguments stay: callbacks and skills take the whole context whether they read it or not.
unused_args = false
-- Long lines are wrapped by hand near 120 columns; help texts and tables of options may run longer.
max_line_length = false
files["tests/lua"] = { globals = { "spec", "describe", "it", "expect" } }
exclude_files = { "types/**", "build/**", "third_party/**" }
