-- luacheck (Debian's lua-check) over the agents, the skills and the Lua half of the runtime:
--   luacheck agents skills src/runtime/lua_lib        (ctest lint.luacheck; scripts/setup.sh --tests)
std = "luajit"
-- the runtime's one global; LuaJIT has no table.unpack, code that runs elsewhere too looks it up
read_globals = { "kagent", table = { fields = { "unpack" } } }
-- hooks (policies, skills, roles, pool methods) take the arguments their caller passes, used or not
unused_args = false
-- a name declared again for a new value (`local code` after a call that returned one) or reused in
-- an inner scope reads well in these short functions
ignore = { "411", "421", "431" }
max_line_length = false
exclude_files = { "**/node_modules/**" }
