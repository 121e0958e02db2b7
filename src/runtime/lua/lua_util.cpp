#include "lua/lua_util.hpp"

#include <string>

namespace kagent {

int push_failure(lua_State* L, std::string_view code, std::string_view message) {
  std::string text(code);
  text += ": ";
  text += message;
  lua_pushnil(L);
  lua_pushlstring(L, text.data(), text.size());
  lua_pushlstring(L, code.data(), code.size());
  return 3;
}

double opt_number_field(lua_State* L, int idx, const char* key, double dflt) {
  if (!lua_istable(L, idx)) return dflt;
  lua_getfield(L, idx, key);
  double v = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : dflt;
  lua_pop(L, 1);
  return v;
}

std::string opt_string_field(lua_State* L, int idx, const char* key, const std::string& dflt) {
  if (!lua_istable(L, idx)) return dflt;
  lua_getfield(L, idx, key);
  std::string v = dflt;
  if (lua_type(L, -1) == LUA_TSTRING) {
    size_t n = 0;
    const char* s = lua_tolstring(L, -1, &n);
    v.assign(s, n);
  }
  lua_pop(L, 1);
  return v;
}

bool opt_bool_field(lua_State* L, int idx, const char* key, bool dflt) {
  if (!lua_istable(L, idx)) return dflt;
  lua_getfield(L, idx, key);
  bool v = lua_isnil(L, -1) ? dflt : lua_toboolean(L, -1) != 0;
  lua_pop(L, 1);
  return v;
}

void set_field(lua_State* L, const char* key, double value) {
  lua_pushnumber(L, value);
  lua_setfield(L, -2, key);
}

void set_field(lua_State* L, const char* key, std::string_view value) {
  lua_pushlstring(L, value.data(), value.size());
  lua_setfield(L, -2, key);
}

void set_bool_field(lua_State* L, const char* key, bool value) {
  lua_pushboolean(L, value ? 1 : 0);
  lua_setfield(L, -2, key);
}

void set_functions(lua_State* L, const luaL_Reg* fns) {
  for (; fns->name != nullptr; ++fns) {
    lua_pushcfunction(L, fns->func);
    lua_setfield(L, -2, fns->name);
  }
}

}  // namespace kagent
