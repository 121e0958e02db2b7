// native.json: Lua values <-> JSON text through nlohmann::json.
// Arrays decoded from JSON carry a shared metatable so that they stay arrays (also when empty)
// when encoded again; json.null is a light userdata so it survives inside arrays.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"

namespace kagent {
namespace {

using nlohmann::json;

const char kArrayMeta = 0;  // registry key of the array-marker metatable
const int kMaxDepth = 200;

void push_array_meta(lua_State* L) {
  lua_pushlightuserdata(L, const_cast<char*>(&kArrayMeta));
  lua_rawget(L, LUA_REGISTRYINDEX);
}

bool has_array_meta(lua_State* L, int idx) {
  if (!lua_getmetatable(L, idx)) return false;
  push_array_meta(L);
  bool same = lua_rawequal(L, -1, -2) != 0;
  lua_pop(L, 2);
  return same;
}

// Throws std::runtime_error on values JSON cannot hold; the caller turns that into a Lua error.
json to_json(lua_State* L, int idx, int depth) {
  if (depth > kMaxDepth) throw std::runtime_error("nesting too deep (a cycle?)");
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return nullptr;
    case LUA_TBOOLEAN:
      return lua_toboolean(L, idx) != 0;
    case LUA_TNUMBER: {
      double v = lua_tonumber(L, idx);
      if (!std::isfinite(v)) throw std::runtime_error("cannot encode NaN or infinity");
      if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) return static_cast<int64_t>(v);
      return v;
    }
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, idx, &n);
      return std::string(s, n);
    }
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == nullptr) return nullptr;
      throw std::runtime_error("cannot encode a userdata");
    case LUA_TTABLE: {
      const bool marked = has_array_meta(L, idx);
      // Count keys; an array has exactly the keys 1..n.
      size_t count = 0;
      bool all_positive_ints = true;
      double max_key = 0;
      lua_pushnil(L);
      while (lua_next(L, idx) != 0) {
        ++count;
        if (lua_type(L, -2) == LUA_TNUMBER) {
          double k = lua_tonumber(L, -2);
          if (k < 1 || k != std::floor(k)) all_positive_ints = false;
          if (k > max_key) max_key = k;
        } else {
          all_positive_ints = false;
        }
        lua_pop(L, 1);
      }
      if (marked || (count > 0 && all_positive_ints && static_cast<size_t>(max_key) == count)) {
        json arr = json::array();
        const size_t n = marked ? lua_objlen(L, idx) : count;
        for (size_t i = 1; i <= n; ++i) {
          lua_rawgeti(L, idx, static_cast<int>(i));
          arr.push_back(to_json(L, -1, depth + 1));
          lua_pop(L, 1);
        }
        return arr;
      }
      json obj = json::object();
      lua_pushnil(L);
      while (lua_next(L, idx) != 0) {
        std::string key;
        if (lua_type(L, -2) == LUA_TSTRING) {
          size_t n = 0;
          const char* s = lua_tolstring(L, -2, &n);
          key.assign(s, n);
        } else if (lua_type(L, -2) == LUA_TNUMBER) {
          double k = lua_tonumber(L, -2);
          key = (k == std::floor(k)) ? std::to_string(static_cast<long long>(k)) : std::to_string(k);
        } else {
          lua_pop(L, 2);
          throw std::runtime_error(std::string("cannot encode a table key of type ") +
                                   lua_typename(L, lua_type(L, -2)));
        }
        obj[key] = to_json(L, -1, depth + 1);
        lua_pop(L, 1);
      }
      return obj;
    }
    default:
      throw std::runtime_error(std::string("cannot encode a value of type ") +
                               lua_typename(L, lua_type(L, idx)));
  }
}

void push_json(lua_State* L, const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      lua_pushlightuserdata(L, nullptr);
      break;
    case json::value_t::boolean:
      lua_pushboolean(L, j.get<bool>() ? 1 : 0);
      break;
    case json::value_t::number_integer:
      lua_pushnumber(L, static_cast<lua_Number>(j.get<int64_t>()));
      break;
    case json::value_t::number_unsigned:
      lua_pushnumber(L, static_cast<lua_Number>(j.get<uint64_t>()));
      break;
    case json::value_t::number_float:
      lua_pushnumber(L, j.get<double>());
      break;
    case json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      break;
    }
    case json::value_t::array: {
      luaL_checkstack(L, 4, "json nesting");
      lua_createtable(L, static_cast<int>(j.size()), 0);
      int i = 1;
      for (const auto& v : j) {
        push_json(L, v);
        lua_rawseti(L, -2, i++);
      }
      push_array_meta(L);
      lua_setmetatable(L, -2);
      break;
    }
    case json::value_t::object: {
      luaL_checkstack(L, 4, "json nesting");
      lua_createtable(L, 0, static_cast<int>(j.size()));
      for (const auto& [k, v] : j.items()) {
        lua_pushlstring(L, k.data(), k.size());
        push_json(L, v);
        lua_rawset(L, -3);
      }
      break;
    }
    default:
      lua_pushnil(L);
  }
}

int l_encode(lua_State* L) {
  luaL_checkany(L, 1);
  const bool pretty = lua_toboolean(L, 2) != 0;
  bool failed = false;
  {
    // Scope: C++ objects die before lua_error unwinds.
    std::string out;
    try {
      json j = to_json(L, 1, 0);
      out = j.dump(pretty ? 2 : -1, ' ', false, json::error_handler_t::replace);
    } catch (const std::exception& e) {
      out = std::string("json.encode: ") + e.what();
      failed = true;
    }
    lua_pushlstring(L, out.data(), out.size());
  }
  if (failed) return lua_error(L);
  return 1;
}

int l_decode(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  json j;
  std::string err;
  try {
    j = json::parse(s, s + n);
  } catch (const json::parse_error& e) {
    err = e.what();
  }
  if (!err.empty()) return push_failure(L, "EPARSE", err);
  push_json(L, j);
  return 1;
}

int l_is_array(lua_State* L) {
  if (lua_type(L, 1) != LUA_TTABLE) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (has_array_meta(L, 1)) {
    lua_pushboolean(L, 1);
    return 1;
  }
  size_t count = 0;
  lua_pushnil(L);
  while (lua_next(L, 1) != 0) {
    ++count;
    lua_pop(L, 1);
  }
  lua_pushboolean(L, count > 0 && lua_objlen(L, 1) == count ? 1 : 0);
  return 1;
}

}  // namespace

int open_native_json(lua_State* L) {
  // The shared metatable marking decoded arrays.
  lua_pushlightuserdata(L, const_cast<char*>(&kArrayMeta));
  lua_newtable(L);
  lua_pushstring(L, "json.array");
  lua_setfield(L, -2, "__name");
  lua_rawset(L, LUA_REGISTRYINDEX);

  static const luaL_Reg fns[] = {
      {"encode", l_encode}, {"decode", l_decode}, {"is_array", l_is_array}, {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  lua_pushlightuserdata(L, nullptr);
  lua_setfield(L, -2, "null");
  lua_newtable(L);  // json.empty_array: an empty table with the array marker
  push_array_meta(L);
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "empty_array");
  return 1;
}

}  // namespace kagent
