// native.time: clocks and the timer behind task.sleep.
#include <ctime>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"
#include "lua/runtime.hpp"

namespace kagent {
namespace {

int l_now(lua_State* L) {
  lua_pushnumber(L, EventLoop::monotonic_now());
  return 1;
}

int l_wall(lua_State* L) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  lua_pushnumber(L, static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9);
  return 1;
}

// sleep_start(seconds) -> op. Completes with `true` after `seconds`.
int l_sleep_start(lua_State* L) {
  const double seconds = luaL_checknumber(L, 1);
  Runtime& rt = Runtime::from(L);
  const uint64_t op = rt.ops().begin();
  const uint64_t timer = rt.loop().add_timer(seconds, [&rt, op] {
    rt.complete(op, [](lua_State* S) {
      lua_pushboolean(S, 1);
      return 1;
    });
  });
  rt.ops().set_cancel(op, [&rt, timer] { rt.loop().cancel_timer(timer); });
  lua_pushnumber(L, static_cast<lua_Number>(op));
  return 1;
}

}  // namespace

int open_native_time(lua_State* L) {
  static const luaL_Reg fns[] = {
      {"now", l_now}, {"wall", l_wall}, {"sleep_start", l_sleep_start}, {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  return 1;
}

}  // namespace kagent
