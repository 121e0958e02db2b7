// native.log: spdlog behind kagent.log; the Lua half adds the task name.
#include <spdlog/spdlog.h>

#include <string>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"
#include "util/logging.hpp"

namespace kagent {
namespace {

template <spdlog::level::level_enum Level>
int l_emit(lua_State* L) {
  size_t tn = 0, mn = 0;
  const char* tag = luaL_checklstring(L, 1, &tn);
  const char* msg = luaL_checklstring(L, 2, &mn);
  spdlog::log(Level, "[{}] {}", std::string_view(tag, tn), std::string_view(msg, mn));
  return 0;
}

int l_enabled(lua_State* L) {
  auto lvl = spdlog::level::from_str(luaL_checkstring(L, 1));
  lua_pushboolean(L, spdlog::should_log(lvl) ? 1 : 0);
  return 1;
}

int l_level(lua_State* L) {
  auto sv = spdlog::level::to_string_view(spdlog::get_level());
  lua_pushlstring(L, sv.data(), sv.size());
  return 1;
}

int l_set_level(lua_State* L) {
  const char* name = luaL_checkstring(L, 1);
  auto lvl = spdlog::level::from_str(name);
  if (lvl == spdlog::level::off && std::string_view(name) != "off")
    return luaL_error(L, "log.set_level: unknown level '%s'", name);
  spdlog::set_level(lvl);
  return 0;
}

int l_status(lua_State* L) {
  size_t n = 0;
  const char* text = lua_isnoneornil(L, 1) ? "" : luaL_checklstring(L, 1, &n);
  set_status_line(std::string(text, n));
  return 0;
}

}  // namespace

int open_native_log(lua_State* L) {
  static const luaL_Reg fns[] = {{"trace", l_emit<spdlog::level::trace>},
                                 {"debug", l_emit<spdlog::level::debug>},
                                 {"info", l_emit<spdlog::level::info>},
                                 {"warn", l_emit<spdlog::level::warn>},
                                 {"error", l_emit<spdlog::level::err>},
                                 {"enabled", l_enabled},
                                 {"level", l_level},
                                 {"set_level", l_set_level},
                                 {"status", l_status},
                                 {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  return 1;
}

}  // namespace kagent
