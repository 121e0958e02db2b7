// native.yaml: YAML text -> Lua values through yaml-cpp (Debian's libyaml-cpp-dev).
// Plain scalars are typed as YAML 1.2's core schema says (null, bool, int, float, else string);
// quoted scalars and ones tagged !!str stay strings. Mappings become tables with string keys,
// sequences tables 1..n carrying the array marker passed in (kagent.json's, so they encode as
// JSON arrays, also when empty); null is the light userdata NULL (kagent.json.null).
// Errors carry the 1-based line and column: "LINE:COL: what".
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>
#include <stdexcept>
#include <string>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"

namespace kagent {
namespace {

const int kMaxDepth = 200;
const char* const kStrTag = "tag:yaml.org,2002:str";

// A failure at a place in the text; the caller turns it into nil, "EPARSE: LINE:COL: what".
struct YamlError : std::runtime_error {
  YamlError(const YAML::Mark& mark, const std::string& what)
      : std::runtime_error(std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": " + what) {}
};

// The core schema's resolution of a plain scalar (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
void push_plain(lua_State* L, const std::string& s) {
  static const std::regex null_re("~|null|Null|NULL|");
  static const std::regex true_re("true|True|TRUE");
  static const std::regex false_re("false|False|FALSE");
  static const std::regex int_re("[-+]?[0-9]+");
  static const std::regex oct_re("0o[0-7]+");
  static const std::regex hex_re("0x[0-9a-fA-F]+");
  static const std::regex float_re("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  static const std::regex inf_re("[-+]?\\.(inf|Inf|INF)");
  static const std::regex nan_re("\\.(nan|NaN|NAN)");
  if (std::regex_match(s, null_re)) {
    lua_pushlightuserdata(L, nullptr);
  } else if (std::regex_match(s, true_re)) {
    lua_pushboolean(L, 1);
  } else if (std::regex_match(s, false_re)) {
    lua_pushboolean(L, 0);
  } else if (std::regex_match(s, int_re) || std::regex_match(s, float_re)) {
    lua_pushnumber(L, std::strtod(s.c_str(), nullptr));  // Lua numbers are doubles
  } else if (std::regex_match(s, oct_re)) {
    lua_pushnumber(L, static_cast<lua_Number>(std::strtoull(s.c_str() + 2, nullptr, 8)));
  } else if (std::regex_match(s, hex_re)) {
    lua_pushnumber(L, static_cast<lua_Number>(std::strtoull(s.c_str() + 2, nullptr, 16)));
  } else if (std::regex_match(s, inf_re)) {
    lua_pushnumber(L, s[0] == '-' ? -HUGE_VAL : HUGE_VAL);
  } else if (std::regex_match(s, nan_re)) {
    lua_pushnumber(L, std::numeric_limits<double>::quiet_NaN());
  } else {
    lua_pushlstring(L, s.data(), s.size());
  }
}

// Pushes the Lua value of `node`; `meta` is the stack index of the array marker metatable.
void push_node(lua_State* L, const YAML::Node& node, int meta, int depth) {
  if (depth > kMaxDepth) throw YamlError(node.Mark(), "nesting deeper than 200 levels");
  luaL_checkstack(L, 6, "yaml nesting");
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      lua_pushlightuserdata(L, nullptr);
      break;
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      // "?": a plain scalar, resolved by the schema; "!" (quoted) and !!str: a string; another
      // tag (!!int, a local one): its text typed as if plain.
      if (node.Tag() == "!" || node.Tag() == kStrTag) {
        lua_pushlstring(L, s.data(), s.size());
      } else {
        push_plain(L, s);
      }
      break;
    }
    case YAML::NodeType::Sequence: {
      lua_createtable(L, static_cast<int>(node.size()), 0);
      int i = 1;
      for (const auto& item : node) {
        push_node(L, item, meta, depth + 1);
        lua_rawseti(L, -2, i++);
      }
      lua_pushvalue(L, meta);
      lua_setmetatable(L, -2);
      break;
    }
    case YAML::NodeType::Map: {
      lua_createtable(L, 0, static_cast<int>(node.size()));
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) throw YamlError(kv.first.Mark(), "a mapping key must be a plain value");
        const std::string& key = kv.first.Scalar();
        lua_pushlstring(L, key.data(), key.size());
        lua_rawget(L, -2);
        const bool taken = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (taken) throw YamlError(kv.first.Mark(), "the key '" + key + "' is given twice");
        lua_pushlstring(L, key.data(), key.size());
        push_node(L, kv.second, meta, depth + 1);
        lua_rawset(L, -3);
      }
      break;
    }
  }
}

// decode(text, array_meta) -> value, or nil, "EPARSE: LINE:COL: what", "EPARSE"
int l_decode(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  luaL_checktype(L, 2, LUA_TTABLE);
  const int top = lua_gettop(L);
  std::string err;
  try {
    // Scope: C++ objects die before a Lua error could unwind (luaL_checkstack).
    YAML::Node root = YAML::Load(std::string(s, n));
    push_node(L, root, 2, 0);
  } catch (const YAML::Exception& e) {
    err = e.mark.is_null() ? e.msg : YamlError(e.mark, e.msg).what();
  } catch (const std::exception& e) {
    err = e.what();
  }
  if (!err.empty()) {
    lua_settop(L, top);
    return push_failure(L, "EPARSE", err);
  }
  return 1;
}

}  // namespace

int open_native_yaml(lua_State* L) {
  static const luaL_Reg fns[] = {{"decode", l_decode}, {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  return 1;
}

}  // namespace kagent
