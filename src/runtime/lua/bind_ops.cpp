// native.ops: cancel a pending operation (used by task.kill and semaphore timeouts).
#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"
#include "lua/runtime.hpp"

namespace kagent {
namespace {

int l_cancel(lua_State* L) {
  const auto id = static_cast<uint64_t>(luaL_checknumber(L, 1));
  lua_pushboolean(L, Runtime::from(L).ops().cancel(id) ? 1 : 0);
  return 1;
}

int l_pending(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(Runtime::from(L).ops().size()));
  return 1;
}

}  // namespace

int open_native_ops(lua_State* L) {
  static const luaL_Reg fns[] = {{"cancel", l_cancel}, {"pending", l_pending}, {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  return 1;
}

}  // namespace kagent
